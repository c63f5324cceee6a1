"""Errors caused by user input: ``main.py`` prints their message without a traceback."""


class LanternUserError(Exception):
    """Something in the config, the files or the command line needs fixing by the user."""


class ConfigError(LanternUserError, ValueError):
    """A config entry is malformed; the message says which one and how to fix it."""


class WorkDirError(LanternUserError):
    """The work dir cannot be used for this run."""


class CheckpointError(LanternUserError):
    """A checkpoint is missing or does not fit the model."""


class ModelContractError(LanternUserError):
    """The model's ``forward`` does not return what the runner, criterion and metric expect."""
