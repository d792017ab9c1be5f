#pragma once
// What the Python module's parts share (keel_module.cpp: the module, jobs
// in the Python process; keel_cluster_module.cpp: clients of a keel
// cluster): errors raised as keel's exceptions, timeouts, numpy views of
// pulled steps and gradients, futures and the Client.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "actors/keel.hpp"

namespace keel_py {

namespace py = pybind11;


// keel.Error and its subclasses (made at import, keel_module.cpp).
extern PyObject* error_type;
extern PyObject* step_moved_type;
extern PyObject* timeout_type;
extern PyObject* ended_type;

[[noreturn]] inline void raise(const caf::error& e) {
  PyObject* type = keel::is(e, keel::errc::step_moved)      ? step_moved_type
                   : keel::is(e, keel::errc::timeout)       ? timeout_type
                   : keel::is(e, keel::errc::shutting_down) ? ended_type
                                                             : error_type;
  PyErr_SetString(type, keel::describe(e).c_str());
  throw py::error_already_set();
}

template <class T>
T value_or_raise(caf::expected<T> x) {
  if (!x)
    raise(x.error());
  return std::move(*x);
}

inline std::chrono::milliseconds to_ms(std::optional<double> seconds) {
  if (!seconds)
    return std::chrono::hours(24 * 365);
  if (!(*seconds >= 0) || !std::isfinite(*seconds))
    throw py::value_error("timeout must be a finite number of seconds >= 0");
  return std::chrono::milliseconds(static_cast<int64_t>(*seconds * 1000.0));
}

// A read-only numpy view of `n` floats at `data`, shaped `shape`, keeping
// `owner` alive.
template <class T, class Owner>
py::array view_of(const T* data, std::vector<py::ssize_t> shape, Owner owner, bool writable) {
  auto keep = new Owner(std::move(owner));
  py::capsule base(keep, [](void* p) { delete static_cast<Owner*>(p); });
  py::array a(py::dtype::of<T>(), std::move(shape), {}, data, base);
  if (!writable)
    a.attr("setflags")(py::arg("write") = false);
  return a;
}

inline std::vector<py::ssize_t> shape_of(const keel::tensor_spec& t) {
  return {t.shape.begin(), t.shape.end()};
}

using pulled_ptr = std::shared_ptr<const keel::pulled_step>;
using gradient_ptr = std::shared_ptr<keel::gradient_buffer>;

// What Python holds of a pull: the step, and the client's layout for names.
struct pulled {
  pulled_ptr step;
  std::shared_ptr<const keel::parameter_layout> layout;
};

struct gradient {
  gradient_ptr grad;
  std::shared_ptr<const keel::parameter_layout> layout;
};

inline uint32_t table_index(const keel::parameter_layout& l, const py::object& table) {
  if (py::isinstance<py::str>(table))
    return value_or_raise(l.find_table(table.cast<std::string>()));
  auto t = table.cast<int64_t>();
  if (t < 0 || static_cast<size_t>(t) >= l.tables().size())
    throw py::index_error("table " + std::to_string(t) + ": the model has " +
                          std::to_string(l.tables().size()) + " tables");
  return static_cast<uint32_t>(t);
}

inline keel::step_keys keys_from(std::optional<std::vector<uint64_t>> sparse,
                          std::optional<std::vector<std::vector<uint64_t>>> tables) {
  keel::step_keys k;
  if (sparse)
    k.sparse = std::move(*sparse);
  if (tables)
    k.tables = std::move(*tables);
  return k;
}

// A keel future as Python sees it: the answer converted to a Python object
// (under the GIL) by `convert`.
template <class T>
struct py_future {
  keel::client_future<T> f;
  std::function<py::object(const T&)> convert;

  bool ready() const { return f.ready(); }

  py::object wait(std::optional<double> timeout) const {
    auto ms = to_ms(timeout);
    caf::expected<T> a = caf::error{};
    {
      py::gil_scoped_release unlocked;
      a = f.wait(ms);
    }
    if (!a)
      raise(a.error());
    return convert(*a);
  }

  // Calls back on a thread of keel's (or at once here): takes the GIL,
  // passes the answer or the error's text, and never lets a Python error
  // escape into keel's thread (it is printed, as Python does for threads).
  void then(py::function callback) const {
    auto cb = std::make_shared<held>(held{std::move(callback)});
    auto conv = convert;
    f.then([cb, conv](const caf::expected<T>& a) {
      py::gil_scoped_acquire locked;
      try {
        if (a)
          cb->o(conv(*a), py::none());
        else
          cb->o(py::none(), keel::describe(a.error()));
      } catch (py::error_already_set& e) {
        e.restore();
        PyErr_Print();
      }
      cb->o = py::object();  // the callable's last reference goes while the GIL is held
    });
  }

  // A Python object a keel thread may drop: its reference goes with the GIL
  // held (a future never answered is dropped with the job, on any thread).
  struct held {
    py::object o;
    ~held() {
      if (o && Py_IsInitialized()) {
        py::gil_scoped_acquire locked;
        o = py::object();
      }
    }
  };
};

template <class T>
void bind_future(py::module_& m, const char* name) {
  using F = py_future<T>;
  py::class_<F>(m, name, "The answer to one request: wait() for it, ready() to poll, then(f) to be called with it.")
      .def("ready", &F::ready, "True once the answer is there.")
      .def("wait", &F::wait, py::arg("timeout") = py::none(),
           "The answer, waiting up to `timeout` seconds (None: no bound); raises keel.Timeout when it "
           "has not come, keel.StepMoved, keel.JobEnded or keel.Error when the request failed.")
      .def("then", &F::then,
           "Calls f(answer, None) or f(None, error_text) once the answer is there (at once if it is), "
           "on a thread of keel's: keep it short, and do not wait on this job's futures in it.");
}

// A client with its model's layout (the job's model, kept alive by it).
struct py_client {
  keel::ps_client c;
  std::shared_ptr<const keel::parameter_layout> layout;

  py_future<uint64_t> next_step() {
    return {c.next_step(), [](const uint64_t& s) { return py::object(py::int_(s)); }};
  }
  py_future<pulled_ptr> pull(uint64_t step, std::optional<std::vector<uint64_t>> sparse,
                             std::optional<std::vector<std::vector<uint64_t>>> tables) {
    auto l = layout;
    return {c.pull(step, keys_from(std::move(sparse), std::move(tables))),
            [l](const pulled_ptr& p) { return py::cast(pulled{p, l}); }};
  }
  gradient gradient_for(const pulled& p) {
    return {std::make_shared<keel::gradient_buffer>(c.gradient_for(*p.step)), layout};
  }
  py_future<uint64_t> push(uint64_t step, const gradient& g) {
    return {c.push(step, *g.grad), [](const uint64_t& s) { return py::object(py::int_(s)); }};
  }
};


// The Client class (keel_module.cpp).
void bind_client(py::module_& m);
// keel.connect and keel.Cluster (keel_cluster_module.cpp).
void bind_cluster(py::module_& m);

}  // namespace keel_py
