"""The one base of every failure the leveller expects.

Bad files, fields, settings and cloud answers raise a subclass whose
message names the cause (the file, field, setting or endpoint) and says what
to do. The commands turn these, and only these, into OpenStackClient errors
(v1/common.py ``boundary``): anything else reaching the user is a bug.
"""


class LevellerError(Exception):
    """An expected failure; str() is the message for the operator."""
