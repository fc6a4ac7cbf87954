"""Launches recorded from the user's own runs (`kernel-lsp record -- CMD`): the recorder loaded into their
processes (boot/), the workspace's record (store.py), running a command with recording on (runner.py), and
stand-alone reproducers of one launch (repro.py)."""
