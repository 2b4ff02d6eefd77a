"""The DTPU hardware contract (contract.json), its golden model, the lowering and the job driver."""
from dtpu.hw.config import HwConfig, get_config

__all__ = ["HwConfig", "get_config"]
