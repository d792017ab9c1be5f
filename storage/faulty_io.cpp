#include "storage/faulty_io.hpp"

#include <algorithm>

#include "messages/errors.hpp"

namespace keel {

namespace fs = std::filesystem;

namespace {

uint64_t& slot(io_counts& c, io_op op) {
  switch (op) {
    case io_op::create: return c.create;
    case io_op::write: return c.write;
    case io_op::fsync: return c.fsync;
    case io_op::rename: return c.rename;
    case io_op::read: return c.read;
  }
  return c.read;
}

caf::error injected(io_op op, const fs::path& p, int error_number) {
  return make_error(errc::io_error, std::string(to_string(op)) + " " + p.string() +
                                      ": " + errno_text(error_number) + " [injected]");
}

class faulty_writable final : public writable_file {
 public:
  faulty_writable(std::unique_ptr<writable_file> inner, std::shared_ptr<faulty_io> io)
    : inner_(std::move(inner)), io_(std::move(io)) {}

  caf::error write_at(uint64_t offset, const void* data, size_t n) override {
    auto d = io_->next(io_op::write);
    if (d.error_number != 0)
      return injected(io_op::write, path(), d.error_number);
    if (!d.tear)
      return inner_->write_at(offset, data, n);
    // A crash is a tear inside the call that keeps half of this write.
    auto keep = d.crash ? n / 2 : static_cast<size_t>(std::min<uint64_t>(d.keep_bytes, n));
    if (auto err = inner_->write_at(offset, data, keep))
      return err;
    if (d.crash)
      d.crash(path(), keep, n);  // meant to end the process; if it returns, the write failed
    if (d.report_success)
      return {};
    return make_error(errc::io_error, "write " + path().string() + " at " +
                                        std::to_string(offset) + ": torn after " +
                                        std::to_string(keep) + " of " + std::to_string(n) +
                                        " bytes: " + errno_text(5) + " [injected]");
  }

  caf::error sync() override {
    auto d = io_->next(io_op::fsync);
    if (d.error_number != 0)
      return injected(io_op::fsync, path(), d.error_number);
    return inner_->sync();
  }

  const fs::path& path() const override { return inner_->path(); }

 private:
  std::unique_ptr<writable_file> inner_;
  std::shared_ptr<faulty_io> io_;
};

class faulty_readable final : public readable_file {
 public:
  faulty_readable(std::unique_ptr<readable_file> inner, std::shared_ptr<faulty_io> io)
    : inner_(std::move(inner)), io_(std::move(io)) {}

  caf::expected<uint64_t> size() override { return inner_->size(); }

  caf::error read_at(uint64_t offset, void* out, size_t n) override {
    auto d = io_->next(io_op::read);
    if (d.error_number != 0)
      return injected(io_op::read, path(), d.error_number);
    return inner_->read_at(offset, out, n);
  }

  const fs::path& path() const override { return inner_->path(); }

 private:
  std::unique_ptr<readable_file> inner_;
  std::shared_ptr<faulty_io> io_;
};

}  // namespace

const char* to_string(io_op op) {
  switch (op) {
    case io_op::create: return "create";
    case io_op::write: return "write";
    case io_op::fsync: return "fsync";
    case io_op::rename: return "rename";
    case io_op::read: return "read";
  }
  return "unknown";
}

uint64_t io_counts::of(io_op op) const {
  auto copy = *this;
  return slot(copy, op);
}

std::shared_ptr<faulty_io> faulty_io::wrap(std::shared_ptr<file_io> inner) {
  return std::shared_ptr<faulty_io>(new faulty_io(std::move(inner)));
}

void faulty_io::arm(io_fault f) {
  std::lock_guard<std::mutex> guard(mtx_);
  f.count = std::max<uint64_t>(f.count, 1);
  faults_.push_back({f, slot(counts_, f.op) + std::max<uint64_t>(f.nth, 1),
                     std::chrono::steady_clock::now() + f.lasting});
}

void faulty_io::arm(io_tear t) {
  std::lock_guard<std::mutex> guard(mtx_);
  tears_.push_back({t, counts_.write + std::max<uint64_t>(t.nth, 1)});
}

void faulty_io::arm(io_crash c) {
  std::lock_guard<std::mutex> guard(mtx_);
  auto at = counts_.write + std::max<uint64_t>(c.nth, 1);
  crashes_.push_back({std::move(c), at});
}

void faulty_io::disarm() {
  std::lock_guard<std::mutex> guard(mtx_);
  faults_.clear();
  tears_.clear();
  crashes_.clear();
}

size_t faulty_io::pending() const {
  std::lock_guard<std::mutex> guard(mtx_);
  auto now = std::chrono::steady_clock::now();
  auto live = std::count_if(faults_.begin(), faults_.end(), [&](const armed_fault& a) {
    return a.fault.lasting.count() == 0 || now < a.until;
  });
  return static_cast<size_t>(live) + tears_.size() + crashes_.size();
}

io_counts faulty_io::counts() const {
  std::lock_guard<std::mutex> guard(mtx_);
  return counts_;
}

faulty_io::decision faulty_io::next(io_op op) {
  std::lock_guard<std::mutex> guard(mtx_);
  auto n = ++slot(counts_, op);
  decision d;
  auto now = std::chrono::steady_clock::now();
  // Timed faults that have run their course go.
  faults_.erase(std::remove_if(faults_.begin(), faults_.end(),
                               [&](const armed_fault& a) { return a.fault.lasting.count() > 0 && now >= a.until; }),
                faults_.end());
  auto f = std::find_if(faults_.begin(), faults_.end(), [&](const armed_fault& a) {
    if (a.fault.op != op || n < a.at)
      return false;
    return a.fault.lasting.count() > 0 || n < a.at + a.fault.count;
  });
  if (f != faults_.end()) {
    d.error_number = f->fault.error_number;
    if (f->fault.lasting.count() == 0 && n + 1 == f->at + f->fault.count)
      faults_.erase(f);
    return d;
  }
  if (op != io_op::write)
    return d;
  auto c = std::find_if(crashes_.begin(), crashes_.end(), [&](const armed_crash& a) { return a.at == n; });
  if (c != crashes_.end()) {
    d.tear = true;
    d.report_success = false;
    d.crash = std::move(c->crash.crash);
    crashes_.erase(c);
    return d;
  }
  auto t = std::find_if(tears_.begin(), tears_.end(), [&](const armed_tear& a) { return a.at == n; });
  if (t != tears_.end()) {
    d.tear = true;
    d.keep_bytes = t->tear.keep_bytes;
    d.report_success = t->tear.report_success;
    tears_.erase(t);
  }
  return d;
}

caf::expected<std::unique_ptr<writable_file>> faulty_io::create(const fs::path& p) {
  auto d = next(io_op::create);
  if (d.error_number != 0)
    return injected(io_op::create, p, d.error_number);
  auto f = inner_->create(p);
  if (!f)
    return std::move(f.error());
  return std::unique_ptr<writable_file>(new faulty_writable(std::move(*f), shared_from_this()));
}

caf::expected<std::unique_ptr<readable_file>> faulty_io::open(const fs::path& p) {
  auto f = inner_->open(p);
  if (!f)
    return std::move(f.error());
  return std::unique_ptr<readable_file>(new faulty_readable(std::move(*f), shared_from_this()));
}

caf::error faulty_io::rename(const fs::path& from, const fs::path& to) {
  auto d = next(io_op::rename);
  if (d.error_number != 0)
    return injected(io_op::rename, from, d.error_number);
  return inner_->rename(from, to);
}

caf::error faulty_io::remove(const fs::path& p) {
  return inner_->remove(p);
}

caf::error faulty_io::sync_dir(const fs::path& dir) {
  auto d = next(io_op::fsync);
  if (d.error_number != 0)
    return injected(io_op::fsync, dir, d.error_number);
  return inner_->sync_dir(dir);
}

caf::error faulty_io::create_dirs(const fs::path& dir) {
  return inner_->create_dirs(dir);
}

caf::expected<std::vector<std::string>> faulty_io::list(const fs::path& dir) {
  return inner_->list(dir);
}

}  // namespace keel
