// kattn::dist::nccl_communicator on a GPU (suite 'cuda'; exit 77 = skipped without one):
// the NCCL group is bootstrapped through MPI (from_mpi), then every collective runs on
// device buffers and is compared with the host-side expectation. Run under mpirun with
// one rank per GPU, or alone (a singleton MPI world of one rank).
#include <cstdio>
#include <vector>

#include <kattn/dist/nccl_communicator.hpp>

namespace {
int failures = 0;
void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "FAIL: %s\n", what);
        ++failures;
    }
}
template <class T>
std::vector<T> to_host(const T* d, std::size_t n) {
    std::vector<T> h(n);
    kattn::dist::detail::cuda_check(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return h;
}
template <class T>
T* to_device(const std::vector<T>& h) {
    T* d = nullptr;
    kattn::dist::detail::cuda_check(cudaMalloc(&d, h.size() * sizeof(T)), "cudaMalloc");
    kattn::dist::detail::cuda_check(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice),
                                    "cudaMemcpy");
    return d;
}
}  // namespace

int main(int argc, char** argv) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::puts("test_nccl: no CUDA device: skipped");
        return 77;
    }
    kattn::dist::mpi_environment env(argc, argv);
    kattn::dist::mpi_communicator world;
    const int me = world.rank(), N = world.size();
    kattn::dist::detail::cuda_check(cudaSetDevice(me % devices), "cudaSetDevice");
    {
        auto gpu = kattn::dist::nccl_communicator::from_mpi(world);
        check(gpu.rank() == me && gpu.size() == N, "rank and size follow the MPI group");
        const std::size_t n = 1000;
        std::vector<float> mine(n);
        for (std::size_t i = 0; i < n; ++i) mine[i] = float(me) + 0.001f * float(i);
        float* d_send = to_device(mine);
        float* d_all = to_device(std::vector<float>(n * std::size_t(N), -1.0f));
        gpu.all_gather(d_send, d_all, n);
        const auto all = to_host(d_all, n * std::size_t(N));
        bool ok = true;
        for (int r = 0; r < N; ++r)
            for (std::size_t i = 0; i < n; ++i) ok = ok && all[std::size_t(r) * n + i] == float(r) + 0.001f * float(i);
        check(ok, "all_gather: every rank's block, in rank order");
        double* d_sum = to_device(std::vector<double>(n, double(me + 1)));
        gpu.all_reduce_sum(d_sum, n);
        const auto sum = to_host(d_sum, n);
        check(sum[0] == double(N) * (N + 1) / 2 && sum[n - 1] == sum[0], "all_reduce_sum");
        std::int64_t* d_b = to_device(std::vector<std::int64_t>(4, me == 0 ? 42 : 0));
        gpu.broadcast(d_b, 4, 0);
        check(to_host(d_b, 4)[3] == 42, "broadcast from rank 0");
        gpu.barrier();
        check(gpu.stats().calls == 3, "stats count the collectives");
        cudaFree(d_send);
        cudaFree(d_all);
        cudaFree(d_sum);
        cudaFree(d_b);
    }
    std::printf("test_nccl: rank %d of %d: %s\n", me, N, failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
