#include "models/model_registry.hpp"

#include "messages/errors.hpp"
#include "models/ctr_model.hpp"
#include "models/mnist_mlp.hpp"
#include "models/mnist_softmax.hpp"
#include "models/probe_model.hpp"
#include "models/sparse_lr.hpp"

namespace keel {

namespace {

caf::expected<std::shared_ptr<const mnist_dataset>> load_mnist(const model_options& o) {
  if (o.data_dir.empty())
    return make_error(errc::invalid_argument,
                      "model_options.data_dir is empty: pass the folder scripts/fetch-mnist.sh "
                      "fills (keel::default_data_dir())");
  return mnist_dataset::load_cached(o.data_dir, o.mnist_limits);
}

}  // namespace

std::vector<std::string> model_names() {
  return {"mnist-mlp", "mnist-softmax", "sparse-lr", "probe", "ctr-lr", "ctr-fm"};
}

caf::expected<std::shared_ptr<const model>> make_model(const std::string& name,
                                                       const model_options& options) {
  if (name == "mnist-mlp" || name == "mnist-softmax") {
    auto data = load_mnist(options);
    if (!data)
      return std::move(data.error());
    if (name == "mnist-mlp")
      return std::shared_ptr<const model>(std::make_shared<mnist_mlp>(std::move(*data)));
    return std::shared_ptr<const model>(std::make_shared<mnist_softmax>(std::move(*data)));
  }
  if (name == "sparse-lr") {
    auto m = sparse_lr::make(options.sparse_lr);
    if (!m)
      return std::move(m.error());
    return std::shared_ptr<const model>(std::move(*m));
  }
  if (name == "probe") {
    auto m = probe_model::make(options.probe);
    if (!m)
      return std::move(m.error());
    return std::shared_ptr<const model>(std::move(*m));
  }
  if (name == "ctr-lr" || name == "ctr-fm") {
    auto m = ctr_model::make(options.ctr, name == "ctr-lr" ? 0 : options.ctr.fm_factors);
    if (!m)
      return std::move(m.error());
    return std::shared_ptr<const model>(std::move(*m));
  }
  std::string known;
  for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
  return make_error(errc::invalid_argument, "unknown model \"" + name + "\"; known: " + known);
}

}  // namespace keel
