"""One training replica's work, on whichever process holds it: the step over packed micro-batches
(``step``), FSDP2 sharding of a replica over a cell's ranks (``sharding``), weights and gradients moving
shard to shard between cells (``transfer``) and checkpoint folders (``checkpoint``). The cells
(``gyre.cells``) and the driver (``gyre.trainer``) both use it, so neither imports the other."""
