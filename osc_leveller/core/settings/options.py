"""The planner's knobs in one frozen object, PlannerOptions, whose fields,
defaults and bounds are those of the settings that fill them (the keys of
core.config with an ``option``)."""

import dataclasses

from osc_leveller.core.model import errors
from osc_leveller.core.settings import config

OPT_OUT_KEY = 'leveller:exclude'


class OptionsError(errors.LevellerError, ValueError):
    """Options that make no sense together; the message names them."""


def _gather(value_of):
    """{field: value_of(key)} of the keys with an option; the keys of a
    dotted option make one dict field (weights.cpu: weights['cpu'])."""
    fields = {}
    for key in config.KEYS:
        if key.option:
            name, _, item = key.option.partition('.')
            value = value_of(key)
            if item:
                fields.setdefault(name, {})[item] = value
            else:
                fields[name] = frozenset(value) \
                    if key.kind == config.LIST else value
    return fields


DEFAULTS = _gather(lambda key: key.default)


def _field(name, default):
    if isinstance(default, dict):
        return name, dict, dataclasses.field(
            default_factory=lambda: dict(default))
    return name, type(default), default


def _validate(options):
    """The options, or OptionsError naming the first that makes no sense:
    each is checked as its setting is, then the weights together."""
    for key in config.KEYS:
        if key.option and key.kind != config.LIST:
            name, _, item = key.option.partition('.')
            value = getattr(options, name)
            try:
                config.check(key, value.get(item) if item else value,
                             key.option, flag=True)
            except config.ConfigError as exc:
                raise OptionsError(str(exc)) from None
    check_weights(options.weights)
    if options.target is not None and options.target > options.threshold:
        raise OptionsError(
            'target %g is above the threshold %g: planning starts when a '
            'domain is above the threshold and stops below the target' % (
                options.target, options.threshold))
    if options.forecast_target is not None and \
            options.forecast_target > options.threshold:
        raise OptionsError(
            'forecast_target %g is above the threshold %g: planning starts '
            'when a domain is above the threshold and stops below the '
            'target' % (options.forecast_target, options.threshold))
    return options


PlannerOptions = dataclasses.make_dataclass(
    'PlannerOptions',
    [_field(name, default) for name, default in DEFAULTS.items()] + [
        # Reference time for cooldowns; None means the snapshot's taken_at.
        ('now', float, None)],
    frozen=True,
    namespace={'validate': _validate, '__module__': __name__,
               # Balancing domains split by CPU model, else architecture.
               'by_model': property(lambda self: self.cpu_compatibility ==
                                    config.CPU_MODEL)})


def check_weights(weights):
    if weights['cpu'] + weights['ram'] <= 0:
        raise OptionsError('the cpu and ram weights cannot both be 0')
    return weights


def weights_of(settings):
    """{dimension: weight} from a core.config.Settings; OptionsError if bad."""
    return check_weights({d: settings['weights.' + d]
                          for d in config.DIMENSIONS})


# The target when none is set: this share of the threshold.
TARGET_SHARE = 0.9


def target_of(threshold, target):
    """The target set, or by default TARGET_SHARE of the threshold."""
    return threshold * TARGET_SHARE if target is None else target


def from_settings(settings, **extra):
    """PlannerOptions from a core.config.Settings, plus fields not in it."""
    fields = _gather(lambda key: settings[key.name])
    fields.update(extra)
    return PlannerOptions(**fields).validate()


def to_document(options):
    """The options as a plan file records them: every field but now, and
    those recorded only if set when they are not."""
    document = {}
    quiet = {key.option for key in config.KEYS if key.recorded_if_set}
    for name in DEFAULTS:
        value = getattr(options, name)
        if name in quiet and value == DEFAULTS[name]:
            continue
        if isinstance(value, frozenset):
            value = sorted(value)
        elif isinstance(value, dict):
            value = {k: v for k, v in value.items()
                     if not ('%s.%s' % (name, k) in quiet
                             and v == DEFAULTS[name].get(k))}
        document[name] = value
    return document


def from_document(document, where='options'):
    """PlannerOptions from the options a plan file records (to_document),
    each checked as its setting is; one it leaves out has its default, and
    what is no planner option (a kind's ask) is the kind's to read.
    OptionsError names the first that is wrong."""
    def value_of(key):
        name, _, item = key.option.partition('.')
        recorded = document.get(name, {} if item else key.default)
        if item:
            if not isinstance(recorded, dict):
                raise OptionsError('%s.%s: must be an object (got %s)' % (
                    where, name, errors.quote(recorded)))
            recorded = recorded.get(item, key.default)
        if recorded is None and key.default is not None:
            raise OptionsError('%s.%s: must be set (got null)' % (
                where, key.option))
        try:
            return config.check(key, recorded, '%s.%s' % (
                where, key.option), flag=True)
        except config.ConfigError as exc:
            raise OptionsError(str(exc)) from None

    return PlannerOptions(**_gather(value_of)).validate()
