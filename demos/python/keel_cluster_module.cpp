// keel.connect: this Python process runs the loops of some workers of a
// job on a keel cluster (keel cluster --application-loop), as a client
// process (keel::cluster_client, actors/cluster/cluster_client.hpp).
//
//   with keel.connect("127.0.0.1:7001", workers=[0, 1], secret_file=f) as cluster:
//       c = cluster.client(0)             # once the coordinator started worker:0 here
//       ... the same loop as with keel.Job's clients ...
//       cluster.wait_released()           # the job has let the workers go
#include "keel_module.hpp"

namespace keel_py {

namespace {

struct py_cluster {
  std::unique_ptr<keel::cluster_client> c;

  // The client's end answers open requests, whose then-callbacks take the
  // GIL on keel's threads: it is released meanwhile.
  ~py_cluster() { close(); }

  void close() {
    py::gil_scoped_release unlocked;
    c.reset();
  }

  keel::cluster_client& live() {
    if (!c)
      raise(keel::make_error(keel::errc::shutting_down, "the cluster client is closed"));
    return *c;
  }

  py_client client(uint32_t worker, std::optional<double> timeout) {
    auto ms = to_ms(timeout);
    auto& cc = live();
    caf::expected<keel::ps_client> got = caf::error{};
    {
      py::gil_scoped_release unlocked;
      got = cc.client(worker, ms);
    }
    if (!got)
      raise(got.error());
    // The layout lives in the job's model, which the client's copy keeps.
    auto holder = std::make_shared<keel::ps_client>(*got);
    return {*got, std::shared_ptr<const keel::parameter_layout>(holder, &holder->layout())};
  }

  void wait_released(std::optional<double> timeout) {
    auto ms = to_ms(timeout);
    auto& cc = live();
    caf::error err;
    {
      py::gil_scoped_release unlocked;
      err = cc.wait_released(ms);
    }
    if (err)
      raise(err);
  }
};

std::unique_ptr<py_cluster> connect(const std::string& join, const std::vector<uint32_t>& workers,
                                    std::optional<std::string> secret_file, const std::string& host, uint16_t port,
                                    std::optional<std::string> data_dir, std::optional<std::string> tls_cert,
                                    std::optional<std::string> tls_key, std::optional<std::string> tls_ca,
                                    bool data_plane, uint32_t heartbeat_ms, uint32_t connection_timeout_ms,
                                    double timeout) {
  keel::cluster_client_config cfg;
  std::string why;
  auto at = keel::parse_node_address(join, why);
  if (!at)
    throw py::value_error("join: " + why);
  cfg.join = *at;
  cfg.workers = workers;
  cfg.secret = value_or_raise(keel::cluster_secret::from_file_or_env(secret_file.value_or("")));
  cfg.host = host;
  cfg.port = port;
  if (data_dir)
    cfg.data_dir = *data_dir;
  keel::tls_files tls{tls_cert.value_or(""), tls_key.value_or(""), tls_ca.value_or("")};
  if (tls.any())
    cfg.tls = value_or_raise(keel::tls_context::load(tls));
  cfg.data_plane = data_plane;
  cfg.heartbeat_interval = std::chrono::milliseconds(heartbeat_ms);
  cfg.connection_timeout = std::chrono::milliseconds(connection_timeout_ms);
  cfg.connect_timeout = to_ms(timeout);
  caf::expected<std::unique_ptr<keel::cluster_client>> c = caf::error{};
  {
    py::gil_scoped_release unlocked;
    c = keel::cluster_client::connect(std::move(cfg));
  }
  auto out = std::make_unique<py_cluster>();
  out->c = value_or_raise(std::move(c));
  return out;
}

}  // namespace

void bind_cluster(py::module_& m) {
  py::class_<py_cluster>(m, "Cluster",
                         "This process as a client of a keel cluster: it runs the loops of its workers.")
      .def("client", &py_cluster::client, py::arg("worker"), py::arg("timeout") = 120.0,
           "The Client of worker `worker`, once the job's coordinator has started it in this process "
           "(waits up to `timeout` seconds; raises keel.Timeout).")
      .def("wait_released", &py_cluster::wait_released, py::arg("timeout") = py::none(),
           "Waits until the job has let this process's workers go (it ended): a worker stays up after "
           "its last step with its replay log, for shards that restart before the job's end.")
      .def_property_readonly("port", [](py_cluster& c) { return c.live().port(); },
                             "Where this process's gate listens.")
      .def("close", &py_cluster::close,
           "Leaves the cluster: workers still running here fail (the job restarts them in a client "
           "that joins again).")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](py_cluster& c, py::args) { c.close(); });
  m.def("connect", &connect, py::arg("join"), py::kw_only(), py::arg("workers"), py::arg("secret_file") = py::none(),
        py::arg("host") = "127.0.0.1", py::arg("port") = 0, py::arg("data_dir") = py::none(),
        py::arg("tls_cert") = py::none(), py::arg("tls_key") = py::none(), py::arg("tls_ca") = py::none(),
        py::arg("data_plane") = true, py::arg("heartbeat_ms") = 200, py::arg("connection_timeout_ms") = 800,
        py::arg("timeout") = 10.0,
        "Joins the node at `join` (\"[NAME@]HOST:PORT\", a node of a keel cluster started with "
        "--application-loop) as a client running the loops of `workers`, proving the cluster secret "
        "(`secret_file`, else $KEEL_CLUSTER_SECRET). `host` and `port`: where this process listens, an "
        "address the coordinator and the nodes reach (on several hosts, this host's; port 0: any). "
        "`tls_*`: PEM files, as keel node's --tls-*. Returns a Cluster (a context manager).");
}

}  // namespace keel_py
