"""The pure core: TrainJob + runtime (+ what already exists) in, desired objects and status out. No I/O."""
