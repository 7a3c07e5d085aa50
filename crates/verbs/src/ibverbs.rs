//! The `ibverbs` fabric (feature `rdma`).
