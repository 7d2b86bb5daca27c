"""The ``channels:`` and ``alerts:`` sections of the configuration file.

They plug into ``apps.pipelines.config_as_code`` through its section registry (see
``sections.py`` here, called from the app's ``ready``): the pipelines app parses,
plans, applies and exports them without importing this app.
"""
