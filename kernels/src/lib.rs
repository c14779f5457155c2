//! dcc-kernels: CUDA C sources under kernels/cuda and bit-faithful host twins.
