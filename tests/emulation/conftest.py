"""The emulated npu is registered with torch while the tests are collected, before any test runs:
torch's autograd engine sizes its per-device queues once, at a process's first backward pass, so a
test worker whose first backward came from another test file (a CPU model) could not run backward
through npu tensors afterwards (activate() then raises EmulationError saying so; a test checks it
in a fresh process)."""

from npu_migrate.emulation._tensor import register_backend

register_backend()
