# The tunebench plugin itself is registered through the pytest11 entry point (pyproject.toml).
# pytester runs small suites in a sandboxed pytest inside the harness's own tests; it can only
# be enabled from the root conftest.
pytest_plugins = ["pytester"]
