"""The rootdir conftest: being here puts tests/ on sys.path (pytest's prepend import
mode), so every test folder can import the shared helpers in ``tests/_support``."""
