// The blocked softmax of linformer/modeling/local_global.py (_chunked_softmax) as one parallel region per call, for
// CPU inference: the same products, softmax and casts on the same chunks of blocks, so the same numbers, but the
// chunks are tasks that the threads take one at a time (a shared counter) and run single-threaded. The op-by-op
// path opens a parallel region in every one of its few thousand small operations per layer, and each region
// ends when its slowest thread does; here a thread that is held back takes fewer chunks instead.
//
// Shapes as in local_global.py: qb (B, H, nb, b, d) query blocks; band_k, band_v (B, H, nb, L, d) each block's band
// (strided views: overlapping rows are not copied); others_k, others_v (B, H, G + c, d) the keys every query sees, or
// empty; biases: additive masks (B or 1, H or 1, nb, b, width_i) in the score dtype, band first, joined per chunk.
#include <torch/extension.h>

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>

#include <algorithm>
#include <atomic>
#include <vector>

namespace {

at::Tensor blocked_softmax(const at::Tensor& qb, const at::Tensor& band_k, const at::Tensor& band_v,
                           const at::Tensor& others_k, const at::Tensor& others_v,
                           const std::vector<at::Tensor>& biases, double scale, int64_t chunk) {
  TORCH_CHECK(qb.dim() == 5 && band_k.dim() == 5 && band_v.dim() == 5, "blocked_softmax: 5-d blocks expected");
  TORCH_CHECK(!biases.empty() && chunk >= 1, "blocked_softmax: biases and a chunk of at least 1 block expected");
  const int64_t B = qb.size(0), H = qb.size(1), nb = qb.size(2), b = qb.size(3), d = qb.size(4);
  const int64_t L = band_k.size(3);
  const bool has_others = others_k.numel() > 0;
  int64_t heads = 1;
  for (const auto& x : biases) heads = std::max(heads, x.size(1));
  const auto acc = biases[0].scalar_type();
  auto out = at::empty({B, H, nb, b, d}, qb.options());
  const int64_t chunks = (nb + chunk - 1) / chunk, tasks = B * chunks;
  std::atomic<int64_t> next{0};
  // one index per thread; each thread then takes chunks until none is left (ATen ops inside run single-threaded)
  at::parallel_for(0, at::get_num_threads(), 1, [&](int64_t, int64_t) {
    at::NoGradGuard no_grad;  // thread-local: the workers start with grad on; the caller's inputs need none
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);  // the caller cast already
    for (int64_t t = next++; t < tasks; t = next++) {
      const int64_t row = t / chunks, i = (t % chunks) * chunk, m = std::min(chunk, nb - i);
      const auto qc = qb.select(0, row).narrow(1, i, m);  // (H, m, b, d)
      auto scores = at::matmul(qc, band_k.select(0, row).narrow(1, i, m).transpose(-1, -2));  // (H, m, b, L)
      if (has_others) {
        const auto rest = at::matmul(qc.reshape({H, m * b, d}), others_k.select(0, row).transpose(-1, -2));
        scores = at::cat({scores, rest.view({H, m, b, -1})}, -1);
      }
      if (scores.scalar_type() != acc) scores = scores.to(acc);
      std::vector<at::Tensor> parts;
      for (const auto& x : biases) {
        auto one = x.select(0, x.size(0) == 1 ? 0 : row);  // (H or 1, nb or 1, b or 1, width_i): broadcast axes
        if (one.size(1) > 1) one = one.narrow(1, i, m);
        parts.push_back(one.expand({heads, m, b, x.size(-1)}));
      }
      auto probs = at::add(at::cat(parts, -1), scores, scale).softmax(-1);
      if (probs.scalar_type() != qb.scalar_type()) probs = probs.to(qb.scalar_type());
      auto o = at::matmul(probs.narrow(-1, 0, L), band_v.select(0, row).narrow(1, i, m));
      if (has_others) {
        const auto rest = probs.narrow(-1, L, probs.size(-1) - L).reshape({H, m * b, -1});
        o = o + at::matmul(rest, others_v.select(0, row)).view({H, m, b, d});
      }
      out.select(0, row).narrow(1, i, m).copy_(o);
    }
  });
  return out;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("blocked_softmax", &blocked_softmax, "local_global._chunked_softmax as one parallel region (CPU inference)",
        py::call_guard<py::gil_scoped_release>());
}
