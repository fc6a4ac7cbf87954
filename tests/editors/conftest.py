def pytest_configure(config):
    config.addinivalue_line("markers", "emacs: drives a real Emacs with eglot; skipped when either is absent")
