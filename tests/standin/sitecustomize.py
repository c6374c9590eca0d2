"""TEST STAND-IN, never shipped: the pipeline tests put this directory on the host's PYTHONPATH so
that a tree without the simulator yet (fleet_decode.sim lands from another branch) can still run
the workflow end to end. The tree's own modules always win: this only appends a fallback
directory to the fleet_decode package's search path."""
from pathlib import Path

try:
    import fleet_decode
except ImportError:
    pass
else:
    fleet_decode.__path__.append(str(Path(__file__).parent / "fleet_decode"))
