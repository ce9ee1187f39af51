"""The flags that set one setting each, built from the setting's
declaration (core.config.KEYS): name, metavar, help, type and choices.

No flag has an argparse default: a flag left out keeps the value of the
settings (clouds.yaml, --config) or the built-in default.
"""

from osc_leveller.core.settings import config

TYPES = {config.FLOAT: float, config.INT: int}


def default_text(name):
    """A setting's default as flag help shows it."""
    value = config.BY_NAME[name].default
    return '%g' % value if isinstance(value, (int, float)) else value


def add(parser, *names, negative=True):
    """The flags of these settings, in this order (the order of --help).

    negative=False leaves out the flag that sets a true/false setting false.
    """
    for name in names:
        key = config.BY_NAME[name]
        flag = key.flag
        # argparse formats help with %: a percentage is written plain.
        text = flag.help.format(help=key.help, default=default_text(
            name)).replace('%', '%%')
        if key.kind == config.BOOL:
            pair = negative and flag.negative
            group = parser.add_mutually_exclusive_group() if pair else parser
            group.add_argument(flag.name, action='store_true', default=None,
                               help=text)
            if pair:
                group.add_argument(flag.negative, dest=flag.dest,
                                   action='store_false',
                                   help=flag.negative_help)
        elif key.kind == config.LIST:
            parser.add_argument(flag.name, metavar=flag.metavar,
                                action='append', help=text)
        elif key.kind == config.CHOICE:
            parser.add_argument(flag.name, choices=key.choices, help=text,
                                metavar='<%s>' % '|'.join(key.choices))
        else:
            parser.add_argument(flag.name, metavar=flag.metavar,
                                type=TYPES.get(key.kind), help=text)


def layers(parsed_args):
    """[(flag, {setting: value})] of the flags given, checked like a file's
    values; a flag names the setting in its own messages."""
    found = []
    for key in config.KEYS:
        if key.flag is not None:
            value = getattr(parsed_args, key.flag.dest, None)
            if value is not None:
                found.append((key.flag.name, {key.name: config.check(
                    key, value, key.flag.name, flag=True)}))
    return found
