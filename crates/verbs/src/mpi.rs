//! The `mpi` fabric (feature `mpi`).
