#pragma once
// keel's embedding API in one header. An application builds a model (one of
// keel's, through make_model, or its own implementation of keel::model),
// fills a job_config, starts a job and waits for its result:
//
//   auto model = keel::make_model("mnist-mlp", {keel::default_data_dir()});
//   keel::job_config cfg;
//   cfg.training_model = *model;
//   cfg.checkpoints.dir = "/tmp/my-run";
//   auto j = keel::job::start(cfg);
//   auto result = (*j)->wait(std::chrono::minutes(10));
//
// See actors/job/job.hpp for the configuration, events, kills and the result,
// actors/faults/recovery.hpp for reading the recoveries back from the events,
// actors/metrics/metrics.hpp (with metrics_http.hpp and metrics_file.hpp) for
// metrics fed from job::on_event, and demos/embedding/ for an application
// that brings its own model. An installed keel is found with find_package(keel) and linked as keel::keel;
// include this header as <keel/keel.hpp>. Only this header and the ones it
// includes are installed: they are keel's public API, and no implementation
// type appears in them. Every call reports failure as a value
// (caf::error / caf::expected<T>, messages/errors.hpp lists the codes) whose
// text names what was wrong; none throws.

#include "actors/cluster/cluster_client.hpp"
#include "actors/faults/recovery.hpp"
#include "actors/job/job.hpp"
#include "actors/job/job_summary.hpp"
#include "actors/job/ps_client.hpp"
#include "actors/metrics/metrics.hpp"
#include "actors/metrics/metrics_file.hpp"
#include "actors/metrics/metrics_http.hpp"
#include "messages/errors.hpp"
#include "models/model.hpp"
#include "models/model_registry.hpp"
