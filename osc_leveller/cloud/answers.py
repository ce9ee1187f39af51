"""What the services answered, checked: one error type for a cloud that
cannot be read, named after the read that failed."""

import contextlib

import requests
from keystoneauth1 import exceptions as ksa_exc
from openstack import exceptions as sdk_exc

from osc_leveller.core.model import errors

MESSAGE = 300  # characters of a service's error text that messages quote


class CollectError(errors.LevellerError):
    """The cloud cannot be read; the message says what to do."""


@contextlib.contextmanager
def reading(what):
    """Failures while reading or joining one answer, named after it
    ('Nova GET /servers/detail'): an unreachable service, an error status,
    a body that is not JSON, or JSON of an unexpected shape."""
    try:
        yield
    except CollectError:
        raise
    except (sdk_exc.SDKException, ksa_exc.ClientException) as exc:
        raise CollectError('%s failed: %s' % (what, why(exc))) from exc
    except requests.exceptions.JSONDecodeError as exc:
        raise CollectError('%s: the answer is not JSON (%s)' % (
            what, exc)) from exc
    except RecursionError:
        raise CollectError('%s: the answer is nested too deeply to be '
                           'Nova\'s or Placement\'s' % what) from None
    # OverflowError: int() of an infinite number.
    except (KeyError, IndexError, TypeError, AttributeError,
            ValueError, OverflowError) as exc:
        raise CollectError('%s: the answer has an unexpected shape (%s: %s)'
                           % (what, type(exc).__name__, short(exc))) \
            from exc


def why(exc):
    """The service's own words, without the URL and request noise."""
    return short(getattr(exc, 'details', None) or exc)


def short(text):
    """The text, cut to what a message quotes."""
    text = str(text)
    return text if len(text) <= MESSAGE else text[:MESSAGE - 3] + '...'


def mapping(name, value):
    """True, or TypeError naming what is not an object (a text would
    pass "'total' in value")."""
    if not isinstance(value, dict):
        raise TypeError('%s is %s, not an object' % (
            name, type(value).__name__))
    return True
