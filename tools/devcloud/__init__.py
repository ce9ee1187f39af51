# Not a library: this file only lets the devcloud's self-checks
# (tools/devcloud/tests) be discovered as devcloud.tests with --top-dir=tools.
