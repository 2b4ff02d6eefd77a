"""The simulated device's units, one module per unit group, each beside its C twin in kernels.c
(the same statements, tested equal): :mod:`~dtpu.hw.units.load` (the load unit's address
generator and activation stream), :mod:`~dtpu.hw.units.store` (the store unit's write queue and
bursts), :mod:`~dtpu.hw.units.acc` (the store unit's read-add-write of split-K sums),
:mod:`~dtpu.hw.units.post` (the post unit's requantization and result packing)."""
