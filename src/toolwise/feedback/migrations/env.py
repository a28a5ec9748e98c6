"""Alembic environment: always run from `toolwise.feedback.migrate` on a connection it passes in."""

from alembic import context

from toolwise.feedback.schema import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
