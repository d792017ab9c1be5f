// Shard apply throughput (issue 11, P2): a parameter shard's whole path for
// one push (decode and validate the frame, dedup and order checks, the BSP
// step's sum, the optimizer over every value) beside a plain streaming loop
// of the same update over the same number of floats, measured in the same
// run, with and without the decode (validation) of the push. The push frames
// are built beforehand, so only the shard's work is timed. Runs alternate
// shard and plain loop; the median is printed.
// The plain loops are written here over float arrays and call no keel code
// (SGD: p -= lr g; Adam: Kingma & Ba's update with the bias corrections
// folded into the step size, the form keel's optimizer uses), so the
// ceiling is independent of what it measures. After each run the bench
// compares the loop's parameters with the shard's and says if they differ.
// Usage: apply_bench [pushes_per_run=32] [runs=5]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "actors/core/shard_core.hpp"
#include "messages/decode.hpp"

using namespace keel;
using steady = std::chrono::steady_clock;

namespace {

double seconds_since(steady::time_point t0) {
  return std::chrono::duration<double>(steady::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

push_msg make_push(const std::vector<float>& grad, uint64_t seq, uint64_t step) {
  return build<schema::Push>(grad.size() / 2 + 64, [&](schema::Push::Builder b) {
    b.setWorker(0);
    b.setSeq(seq);
    b.setStep(step);
    b.setShard(0);
    auto r = b.initDense(1)[0];
    r.setBegin(0);
    r.setEnd(grad.size());
    std::memcpy(r.initValues(grad.size() * 4).begin(), grad.data(), grad.size() * 4);
  });
}

decoded<schema::Push> decode_or_die(const push_msg& f) {
  auto d = decode(f);
  if (!d) {
    std::fprintf(stderr, "apply_bench: %s\n", describe(d.error()).c_str());
    std::exit(1);
  }
  return std::move(*d);
}

void offer_or_die(shard_core& shard, decoded<schema::Push> d) {
  auto out = shard.offer(std::move(d));
  // Under BSP the shard holds the push (accepted) and applies the step at
  // once: one worker's push completes it.
  bool applied = out.status == schema::PushAck::Status::APPLIED ||
                 (out.status == schema::PushAck::Status::ACCEPTED && out.steps_applied == 1);
  if (!applied) {
    std::fprintf(stderr, "apply_bench: push not applied: %s\n", out.reason.c_str());
    std::exit(1);
  }
}

// Textbook Adam over plain arrays (Kingma & Ba 2015, Algorithm 1, with
// the bias corrections folded into the step size as their section 2
// suggests): step `t` >= 1 over `n` parameters.
void plain_adam(float lr, float beta1, float beta2, float epsilon, uint64_t t,
                float* __restrict__ p, float* __restrict__ m, float* __restrict__ v,
                const float* __restrict__ g, size_t n) {
  const double td = static_cast<double>(t);
  const float bias1 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta1), td));
  const float bias2 = static_cast<float>(1.0 - std::pow(static_cast<double>(beta2), td));
  const float alpha_t = lr * std::sqrt(bias2) / bias1;
  for (size_t k = 0; k < n; ++k) {
    m[k] = beta1 * m[k] + (1.0f - beta1) * g[k];
    v[k] = beta2 * v[k] + (1.0f - beta2) * g[k] * g[k];
    p[k] -= alpha_t * m[k] / (std::sqrt(v[k]) + epsilon);
  }
}

struct figures {
  double shard_gbps = 0;  // decode (validate) + offer + apply
  double apply_gbps = 0;  // offer + apply of validated pushes
  double plain_gbps = 0;
  double max_difference = 0;  // |shard - plain loop| over the parameters, largest
};

// One shard of `floats` dense parameters, one worker; `pushes` pushes.
figures run(const optimizer_config& opt, const consistency& rule, size_t floats, size_t pushes, size_t runs) {
  std::vector<float> grad(floats);
  for (size_t i = 0; i < floats; ++i)
    grad[i] = 1e-3f * static_cast<float>((i % 97) + 1);
  std::vector<push_msg> frames;
  for (size_t i = 0; i < pushes; ++i)
    frames.push_back(make_push(grad, i + 1, i));
  // The loop reads as many distinct gradients as the shard does, so that
  // neither side finds them in a cache the other cannot.
  std::vector<std::vector<float>> grads(pushes, grad);
  std::vector<double> shard_runs, apply_runs, plain_runs;
  double keep = 0, max_difference = 0;
  for (size_t r = 0; r < runs; ++r) {
    shard_config cfg;
    cfg.num_workers = 1;
    cfg.dense = {0, floats};
    cfg.rule = rule;
    cfg.optimizer = opt;
    // The real path: each push decoded (validated) and offered in turn.
    auto shard = std::move(*shard_core::make(cfg, std::vector<float>(floats, 0.5f)));  // sizes agree
    auto t0 = steady::now();
    for (auto& f : frames)
      offer_or_die(shard, decode_or_die(f));
    shard_runs.push_back(seconds_since(t0));
    keep += shard.dense()[floats / 2];
    // The shard's own part: pushes decoded beforehand, offered and applied.
    std::vector<decoded<schema::Push>> decoded_pushes;
    for (auto& f : frames)
      decoded_pushes.push_back(decode_or_die(f));
    auto shard2 = std::move(*shard_core::make(cfg, std::vector<float>(floats, 0.5f)));
    t0 = steady::now();
    for (auto& d : decoded_pushes)
      offer_or_die(shard2, std::move(d));
    apply_runs.push_back(seconds_since(t0));
    keep += shard2.dense()[floats / 2];

    // The ceiling: the same update as one streaming loop over plain arrays
    // (Adam's moments start at zero).
    std::vector<float> p(floats, 0.5f), m(floats, 0.0f), v(floats, 0.0f);
    t0 = steady::now();
    for (size_t i = 0; i < pushes; ++i) {
      if (opt.kind == optimizer_kind::sgd) {
        const float lr = opt.lr;
        float* __restrict__ pp = p.data();
        const float* __restrict__ gg = grads[i].data();
        for (size_t k = 0; k < floats; ++k)
          pp[k] -= lr * gg[k];
      } else {
        plain_adam(opt.lr, opt.beta1, opt.beta2, opt.epsilon, i + 1, p.data(), m.data(), v.data(),
                   grads[i].data(), floats);
      }
    }
    plain_runs.push_back(seconds_since(t0));
    keep += p[floats / 2];
    for (size_t k = 0; k < floats; ++k)
      max_difference =
          std::max(max_difference, static_cast<double>(std::fabs(shard2.dense()[k] - p[k])));
  }
  if (!std::isfinite(keep))
    std::printf("(non-finite parameters)\n");
  double bytes = static_cast<double>(floats * 4 * pushes);
  return {bytes / median(shard_runs) / 1e9, bytes / median(apply_runs) / 1e9,
          bytes / median(plain_runs) / 1e9, max_difference};
}

}  // namespace

int main(int argc, char** argv) {
  size_t pushes = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 32;
  size_t runs = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 5;
  if (pushes == 0 || runs == 0) {
    std::fprintf(stderr, "apply_bench: pushes_per_run and runs must be positive numbers\n");
    return 2;
  }
  std::printf("%-8s %-9s %-4s %-44s %10s %12s %7s\n", "payload", "optimizer", "rule", "measurement", "GB/s",
              "ceiling GB/s", "ratio");
  for (size_t mib : {1, 16}) {
    size_t floats = mib * (1 << 20) / 4;
    for (auto kind : {optimizer_kind::sgd, optimizer_kind::adam}) {
      for (auto rk : {consistency_kind::bsp, consistency_kind::asp}) {
        optimizer_config opt;
        opt.kind = kind;
        opt.lr = 0.01f;
        consistency rule;
        rule.kind = rk;
        auto f = run(opt, rule, floats, pushes, runs);
        std::string size = std::to_string(mib) + " MiB";
        const char* rule_name = rk == consistency_kind::bsp ? "bsp" : "asp";
        std::printf("%-8s %-9s %-4s %-44s %10.2f %12.2f %7.2f\n", size.c_str(), to_string(kind), rule_name,
                    "shard offer+apply (validated push) vs loop", f.apply_gbps, f.plain_gbps,
                    f.apply_gbps / f.plain_gbps);
        std::printf("%-8s %-9s %-4s %-44s %10.2f %12.2f %7.2f\n", size.c_str(), to_string(kind), rule_name,
                    "shard decode+offer+apply vs plain loop", f.shard_gbps, f.plain_gbps,
                    f.shard_gbps / f.plain_gbps);
        if (f.max_difference > 0)
          std::printf("  (the plain loop's parameters differ from the shard's by up to %.3g)\n",
                      f.max_difference);
      }
    }
  }
  return 0;
}
