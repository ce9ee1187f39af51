# Sphinx configuration for the osc-leveller documentation.
#
# Builds offline with packages from PyPI only: the built-in alabaster theme,
# no openstackdocstheme and no intersphinx.

project = 'osc-leveller'
copyright = 'osc-leveller developers'
author = 'osc-leveller developers'

extensions = [
    'cliff.sphinxext',
    # The table of settings in reference/configuration.rst.
    'osc_leveller.sphinxext',
]

root_doc = 'index'
exclude_patterns = []
pygments_style = 'sphinx'

html_theme = 'alabaster'
html_title = 'osc-leveller'

# Show commands as "openstack leveller plan", the way operators type them.
autoprogram_cliff_application = 'openstack'
# The output formatting options are common to every OpenStackClient listing
# command and documented there; listing them per command adds only noise.
autoprogram_cliff_ignored = [
    '--help', '--format', '--column', '--max-width', '--fit-width',
    '--print-empty', '--prefix', '--noindent', '--quote', '--sort-column',
    '--sort-ascending', '--sort-descending',
]
