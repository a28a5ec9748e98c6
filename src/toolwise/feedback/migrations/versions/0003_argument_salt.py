"""A random salt per database for the argument digest (an unsalted digest of a guessable secret, a
PIN or a short password, is reversed by trying every candidate).

Revision ID: 0003
Revises: 0002
"""

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "secrets",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(128), nullable=False),
    )
    op.bulk_insert(table, [{"name": "argument_salt", "value": secrets.token_hex(32)}])


def downgrade() -> None:
    op.drop_table("secrets")
