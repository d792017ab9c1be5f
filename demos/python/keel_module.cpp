// The Python module `keel`: a job in the Python process whose workers'
// loops Python runs through ps_clients (actors/job/ps_client.hpp), with
// numpy arrays for parameters and gradients.
//
//   job = keel.Job("mnist-mlp", steps=1000, workers=2, checkpoint_dir=d)
//   c = job.client(0)
//   s = c.next_step().wait()
//   p = c.pull(s).wait()                  # p.tensor("fc1.weight"): a numpy view
//   g = c.gradient_for(p)                 # g.tensor("fc1.weight"): writable view
//   c.push(s, g).wait()
//   result = job.wait()
//
// Arrays: a pull's parameters are read-only numpy views of the pulled
// step's own buffers (no copy; the array keeps the step alive), and a
// gradient's arrays are writable views of the gradient keel pushes (one
// copy on push, into the worker's replay log). Waiting releases the GIL.
// Errors raise keel.Error, or its subclasses keel.StepMoved (ask
// next_step() and go on from there), keel.Timeout and keel.JobEnded, each
// with keel's message naming what was wrong.
#include "keel_module.hpp"

#include <algorithm>
#include <cfloat>

#include "actors/job/config_bounds.hpp"

namespace keel_py {

PyObject* error_type = nullptr;
PyObject* step_moved_type = nullptr;
PyObject* timeout_type = nullptr;
PyObject* ended_type = nullptr;

namespace {

// The job, held by Python. Waits and requests release the GIL, so that
// Python threads driving other workers go on meanwhile.
struct py_job {
  std::unique_ptr<keel::job> j;
  std::shared_ptr<const keel::model> model;

  // The job's end answers open requests, whose then-callbacks take the
  // GIL on keel's threads: it is released while the job stops.
  ~py_job() {
    py::gil_scoped_release unlocked;
    j.reset();
  }

  py_client client(uint32_t worker) {
    auto c = j->client(worker);
    if (!c)
      raise(c.error());
    return {*c, std::shared_ptr<const keel::parameter_layout>(model, &model->layout())};
  }

  void kill(const std::string& name) {
    caf::error err;
    {
      py::gil_scoped_release unlocked;
      err = j->kill(name);
    }
    if (err)
      raise(err);
  }

  void stop() {
    caf::error err;
    {
      py::gil_scoped_release unlocked;
      err = j->stop();
    }
    if (err)
      raise(err);
  }

  py::dict wait(std::optional<double> timeout) {
    auto ms = to_ms(timeout);
    caf::expected<keel::job_result> r = caf::error{};
    {
      py::gil_scoped_release unlocked;
      r = j->wait(ms);
    }
    if (!r)
      raise(r.error());
    auto s = keel::summarize(*r);
    auto maybe = [](const std::optional<double>& v) { return v ? py::object(py::float_(*v)) : py::object(py::none()); };
    py::dict d;
    d["steps"] = s.steps;
    d["examples"] = s.test_examples;
    d["accuracy"] = maybe(s.test_accuracy);
    d["log_loss"] = maybe(s.test_log_loss);
    d["pushes_acked"] = s.pushes_acked;
    d["pushes_applied"] = s.pushes_applied;
    d["restarts"] = s.restarts;
    d["rollbacks"] = s.rollbacks;
    d["checkpoints"] = s.checkpoints;
    d["params_sha256"] = s.params_sha256;
    d["seconds"] = s.seconds;
    return d;
  }
};

template <class E>
E choice(const std::string& what, const std::string& given, std::initializer_list<std::pair<const char*, E>> known) {
  std::string names;
  for (auto& [name, value] : known) {
    if (given == name)
      return value;
    names += names.empty() ? name : std::string(", ") + name;
  }
  throw py::value_error(what + " \"" + given + "\": one of " + names);
}

// The keyword of Job() that sets a field of job_config, by its path as
// config_bounds.hpp names it, or the path itself when no keyword does.
std::string keyword_of(const std::string& field) {
  if (field.rfind("training.rules[", 0) == 0)
    return "rules" + field.substr(std::string("training.rules").size());
  static const std::pair<const char*, const char*> keywords[] = {
    {"training.shards", "shards"}, {"training.workers", "workers"}, {"training.batch_size", "batch_size"},
    {"training.steps", "steps"},   {"training.optimizer.lr", "lr"},
  };
  for (auto& [path, keyword] : keywords)
    if (field == path)
      return keyword;
  return field;
}

std::unique_ptr<py_job> start_job(const std::string& model, uint64_t steps, const std::string& checkpoint_dir,
                                  uint32_t shards, uint32_t workers, uint32_t batch_size, double lr,
                                  const std::string& optimizer, const std::string& rule, uint32_t staleness,
                                  const std::string& combine, uint64_t seed, uint64_t checkpoint_every,
                                  std::optional<std::string> data_dir, uint64_t train_examples,
                                  uint64_t test_examples, bool application_loop,
                                  const std::map<std::string, std::string>& rules) {
  keel::model_options o;
  o.data_dir = data_dir ? std::filesystem::path(*data_dir) : keel::default_data_dir();
  o.mnist_limits.train = train_examples;
  o.mnist_limits.test = test_examples;
  auto m = keel::make_model(model, o);
  if (!m)
    raise(m.error());
  keel::job_config cfg;
  cfg.training_model = *m;
  cfg.application_loop = application_loop;
  cfg.training.shards = shards;
  cfg.training.workers = workers;
  cfg.training.batch_size = batch_size;
  cfg.training.steps = steps;
  cfg.training.seed = seed;
  // A finite double past float's range stays past the bound, not an infinity.
  cfg.training.optimizer.lr = static_cast<float>(std::isfinite(lr) ? std::clamp<double>(lr, -FLT_MAX, FLT_MAX) : lr);
  cfg.training.optimizer.kind =
      choice<keel::optimizer_kind>("optimizer", optimizer,
                                   {{"sgd", keel::optimizer_kind::sgd},
                                    {"momentum", keel::optimizer_kind::momentum},
                                    {"adagrad", keel::optimizer_kind::adagrad},
                                    {"adam", keel::optimizer_kind::adam}});
  cfg.training.rule.kind = choice<keel::consistency_kind>(
      "rule", rule,
      {{"bsp", keel::consistency_kind::bsp}, {"ssp", keel::consistency_kind::ssp}, {"asp", keel::consistency_kind::asp}});
  cfg.training.rule.staleness = staleness;
  cfg.training.combine = choice<keel::gradient_combine>(
      "combine", combine, {{"sum", keel::gradient_combine::sum}, {"mean", keel::gradient_combine::mean}});
  std::string rules_text;
  for (auto& [name, rule] : rules) rules_text += (rules_text.empty() ? "" : ",") + name + "=" + rule;
  auto parsed = keel::parse_rules(rules_text, cfg.training.optimizer);
  if (!parsed)
    raise(parsed.error());
  cfg.training.rules = std::move(*parsed);
  cfg.checkpoints.dir = checkpoint_dir;
  cfg.checkpoints.every = checkpoint_every;
  // What job::start refuses (config_bounds.hpp), refused here by keyword.
  if (auto problem = keel::check_bounds(cfg))
    throw py::value_error(keyword_of(problem->field) + ": " + problem->why);
  caf::expected<std::unique_ptr<keel::job>> j = caf::error{};
  {
    py::gil_scoped_release unlocked;
    j = keel::job::start(std::move(cfg));
  }
  if (!j)
    raise(j.error());
  auto out = std::make_unique<py_job>();
  out->j = std::move(*j);
  out->model = *m;
  return out;
}

}  // namespace

void bind_client(py::module_& m) {
  py::class_<py_client>(m, "Client", "Runs one worker's loop: next_step, pull, push (keel::ps_client).")
      .def_property_readonly("worker", [](const py_client& c) { return c.c.worker(); })
      .def_property(
          "check_finite", [](const py_client& c) { return c.c.checks_finite(); },
          [](py_client& c, bool on) { c.c.check_finite(on); },
          "Whether push() refuses a gradient holding a NaN or an infinity, raising keel.Error naming the "
          "tensor or table and the element (True by default). False: such a push is answered, and the "
          "worker skips the step (nothing of it applied), as keel's own workers do.")
      .def_property_readonly("steps", [](const py_client& c) { return c.c.steps(); },
                             "The job's steps: the loop runs 0 .. steps-1.")
      .def_property_readonly(
          "layout",
          [](const py_client& c) {
            py::list dense, tables;
            for (auto& t : c.layout->dense()) dense.append(py::make_tuple(t.name, shape_of(t)));
            for (auto& t : c.layout->tables()) tables.append(py::make_tuple(t.name, t.dim));
            py::dict d;
            d["dense"] = dense;
            d["dense_size"] = c.layout->dense_size();
            d["sparse_keys"] = c.layout->sparse_key_count();
            d["tables"] = tables;
            return d;
          },
          "The model's parameters: dense [(name, shape)], dense_size, sparse_keys (how many), tables "
          "[(name, dim)].")
      .def("next_step", &py_client::next_step,
           "A future of the step to run next (`steps` once every step is done).")
      .def("pull", &py_client::pull, py::arg("step"), py::arg("sparse") = py::none(),
           py::arg("tables") = py::none(),
           "A future of the step's parameters (a Pulled): every dense tensor, the `sparse` keys, and per "
           "table the rows of its keys (`tables`: one list per table, each ascending and distinct). "
           "Asked again with the same keys (after a wait that raised keel.Timeout), it gets the first "
           "pull's answer.")
      .def("gradient_for", &py_client::gradient_for, "A zero Gradient shaped for the push of this pull's step.")
      .def("push", &py_client::push, py::arg("step"), py::arg("gradient"),
           "A future of the step, answered once every shard has acknowledged the push.");
}

}  // namespace keel_py

PYBIND11_MODULE(keel, m) {
  using namespace keel_py;
  m.doc() = "keel: a fault-tolerant parameter server; run workers' training loops from Python.";
  // pybind11 looks numpy's C API up on first use, in a static initialiser
  // that imports numpy: two threads making their first arrays at once
  // deadlock there (one holds the initialiser and waits for the GIL the
  // other holds while it waits for the initialiser). Done here, once, at
  // import, before any thread of the application can get there.
  (void)py::array_t<float>(0);
  error_type = PyErr_NewException("keel.Error", PyExc_RuntimeError, nullptr);
  step_moved_type = PyErr_NewException("keel.StepMoved", error_type, nullptr);
  timeout_type = PyErr_NewException("keel.Timeout", error_type, nullptr);
  ended_type = PyErr_NewException("keel.JobEnded", error_type, nullptr);
  m.attr("Error") = py::handle(error_type);
  m.attr("StepMoved") = py::handle(step_moved_type);
  m.attr("Timeout") = py::handle(timeout_type);
  m.attr("JobEnded") = py::handle(ended_type);
  m.def("default_data_dir", [] { return keel::default_data_dir().string(); },
        "The folder scripts/fetch-mnist.sh fills.");

  py::class_<pulled>(m, "Pulled", "One step's parameters, as the shards served them.")
      .def_property_readonly("step", [](const pulled& p) { return p.step->step; })
      .def_property_readonly("dense",
                             [](const pulled& p) {
                               return view_of(p.step->dense.data(), {static_cast<py::ssize_t>(p.step->dense.size())},
                                              p.step, false);
                             })
      .def(
          "tensor",
          [](const pulled& p, const std::string& name) {
            auto t = value_or_raise(p.layout->find(name));
            return view_of(p.step->dense.data() + t.first_key, shape_of(t), p.step, false);
          },
          "Dense tensor `name` of the layout, shaped, read-only (no copy).")
      .def_property_readonly("sparse_values",
                             [](const pulled& p) {
                               return view_of(p.step->sparse_values.data(),
                                              {static_cast<py::ssize_t>(p.step->sparse_values.size())}, p.step,
                                              false);
                             })
      .def(
          "rows",
          [](const pulled& p, const py::object& table) {
            auto t = table_index(*p.layout, table);
            auto dim = static_cast<py::ssize_t>(p.layout->tables()[t].dim);
            auto n = static_cast<py::ssize_t>(p.step->table_keys[t].size());
            return view_of(p.step->table_rows[t].data(), {n, dim}, p.step, false);
          },
          "The pulled rows of a table (by name or index), [keys, dim], in the order the keys were asked.");

  py::class_<gradient>(m, "Gradient", "A step's gradient, shaped for its push: fill its arrays in place.")
      .def_property_readonly("dense",
                             [](const gradient& g) {
                               return view_of(g.grad->dense.data(), {static_cast<py::ssize_t>(g.grad->dense.size())},
                                              g.grad, true);
                             })
      .def(
          "tensor",
          [](const gradient& g, const std::string& name) {
            auto t = value_or_raise(g.layout->find(name));
            return view_of(g.grad->dense.data() + t.first_key, shape_of(t), g.grad, true);
          },
          "Dense tensor `name`'s gradient, shaped, writable (no copy).")
      .def_property_readonly("sparse_values",
                             [](const gradient& g) {
                               return view_of(g.grad->sparse_values.data(),
                                              {static_cast<py::ssize_t>(g.grad->sparse_values.size())}, g.grad, true);
                             })
      .def(
          "rows",
          [](const gradient& g, const py::object& table) {
            auto t = table_index(*g.layout, table);
            auto dim = static_cast<py::ssize_t>(g.layout->tables()[t].dim);
            auto n = static_cast<py::ssize_t>(g.grad->tables[t].keys.size());
            return view_of(g.grad->tables[t].rows.data(), {n, dim}, g.grad, true);
          },
          "The gradient of a table's pulled rows, [keys, dim], writable.")
      .def_property(
          "loss", [](const gradient& g) { return g.grad->loss; },
          [](gradient& g, double loss) { g.grad->loss = loss; }, "The batch's loss (reported in the job's events).");

  bind_future<uint64_t>(m, "StepFuture");
  bind_future<pulled_ptr>(m, "PullFuture");
  bind_client(m);
  bind_cluster(m);

  py::class_<py_job>(m, "Job", "A training job in this process whose workers' loops Python runs.")
      .def(py::init(&start_job), py::arg("model"), py::arg("steps"), py::kw_only(), py::arg("checkpoint_dir"),
           py::arg("shards") = 2, py::arg("workers") = 2, py::arg("batch_size") = 32, py::arg("lr") = 0.1,
           py::arg("optimizer") = "sgd", py::arg("rule") = "bsp", py::arg("staleness") = 0,
           py::arg("combine") = "sum", py::arg("seed") = 1, py::arg("checkpoint_every") = 50,
           py::arg("data_dir") = py::none(), py::arg("train_examples") = 0, py::arg("test_examples") = 0,
           py::arg("application_loop") = true, py::arg("rules") = std::map<std::string, std::string>(),
           "Starts a job of registry model `model` (e.g. \"mnist-mlp\") running `steps` steps, its "
           "checkpoints in `checkpoint_dir` (an empty or new folder). The model gives the layout, the "
           "initial values and the final evaluation; Python gives every step's gradient through the "
           "workers' Clients (with application_loop=False keel's workers train the model themselves, "
           "as keel train does, and there are no Clients). `rules` gives named dense tensors and tables "
           "update rules of their own: {\"fc1.weight\": \"adam:0.001\"} (OPTIMIZER[:LR]).")
      .def("client", &py_job::client, py::arg("worker"), "The Client of worker `worker`.")
      .def("kill", &py_job::kill, py::arg("name"), "Kills an actor now: \"shard:N\", \"worker:N\", ...")
      .def("wait", &py_job::wait, py::arg("timeout") = py::none(),
           "Waits for the job's end and returns its result as a dict.")
      .def("stop", &py_job::stop, "Stops the job: every open request raises keel.JobEnded.");
}
