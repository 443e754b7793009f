"""Helpers the tests of several folders share (imported as `helpers.<module>`; tests/ is on the path
through tests/conftest.py): the CLI in-process, the report JSON checked against its schema, the fixed
run the report tests read, the gate's frozen workloads, and the short passkey cases the real-model
engine tests send."""
