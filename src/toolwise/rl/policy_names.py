"""The names of the policies (`rl/policies`' `POLICIES`, pinned equal by a test) without importing them:
the config checks a `policy` setting and the CLI's help lists them at every command's start, before numpy."""

POLICY_NAMES = ("choice", "lints", "linucb", "outcome", "semantic", "thompson", "ucb")
