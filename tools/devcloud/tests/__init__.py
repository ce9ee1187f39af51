"""The devcloud's own checks, apart from the plugin's tests.

unit/        the exporter and the retries, no cloud needed
functional/  the running devcloud: Nova, Placement and Prometheus as the
             scenarios say

`devcloud check` runs both (stestr, repository tools/devcloud/.stestr);
tox -e functional runs them before the plugin's functional tests.
"""
