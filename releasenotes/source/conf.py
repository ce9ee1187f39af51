# Sphinx configuration for the osc-leveller release notes (reno).
#
# Builds offline with packages from PyPI only: the built-in alabaster theme,
# no openstackdocstheme.

project = 'osc-leveller Release Notes'
copyright = 'osc-leveller developers'
author = 'osc-leveller developers'

extensions = [
    'reno.sphinxext',
]

root_doc = 'index'
exclude_patterns = []
pygments_style = 'sphinx'

html_theme = 'alabaster'
html_title = 'osc-leveller Release Notes'
