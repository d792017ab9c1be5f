#include "models/mnist_data.hpp"
#include "models/model_registry.hpp"

#include <cstdlib>
#include <fstream>
#include <string>
#include <system_error>

#include "messages/errors.hpp"

namespace keel {

namespace fs = std::filesystem;

namespace {

constexpr uint32_t images_magic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr uint32_t labels_magic = 0x00000801;  // unsigned bytes, 1 dimension
constexpr const char* fetch_hint = "; fetch the data with `bash scripts/fetch-mnist.sh`";

caf::error file_error(errc code, const fs::path& file, const std::string& what) {
  return make_error(code, file.string() + ": " + what + fetch_hint);
}

uint32_t big_endian_u32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::string hex32(uint32_t v) {
  static const char digits[] = "0123456789abcdef";
  std::string s = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) s += digits[(v >> shift) & 0xf];
  return s;
}

// An open IDX file whose header has been read and whose size matches it.
struct idx_file {
  std::ifstream in;
  std::vector<uint64_t> dims;
  uint64_t item_bytes = 1;  // bytes of one item (the product of dims[1..])
};

// Opens `file`, checks magic and that its size is exactly what the header says.
caf::expected<idx_file> open_idx(const fs::path& file, uint32_t magic, size_t rank) {
  std::error_code ec;
  if (!fs::exists(file, ec))
    return file_error(errc::not_found, file, "file not found");
  const uint64_t file_bytes = fs::file_size(file, ec);
  if (ec)
    return file_error(errc::io_error, file, "cannot read its size: " + ec.message());
  idx_file f;
  f.in.open(file, std::ios::binary);
  if (!f.in)
    return file_error(errc::io_error, file, "cannot open for reading");
  const uint64_t header_bytes = 4 + 4 * rank;
  unsigned char header[16] = {};
  if (file_bytes < header_bytes || !f.in.read(reinterpret_cast<char*>(header), header_bytes))
    return file_error(
        errc::io_error, file,
        "truncated: " + std::to_string(file_bytes) + " bytes, shorter than an IDX header");
  const uint32_t got = big_endian_u32(header);
  if (got != magic)
    return file_error(errc::invalid_field, file,
                      "bad magic number " + hex32(got) + " (expected " + hex32(magic) +
                          "); not an IDX file of this kind");
  uint64_t expected = header_bytes;
  uint64_t items = 1;
  for (size_t i = 0; i < rank; ++i) {
    const uint64_t d = big_endian_u32(header + 4 + 4 * i);
    if (d == 0)
      return file_error(errc::invalid_field, file,
                        "dimension " + std::to_string(i) + " is zero in the header");
    f.dims.push_back(d);
    items *= d;
    if (i > 0)
      f.item_bytes *= d;
  }
  expected += items;
  if (file_bytes < expected)
    return file_error(errc::io_error, file,
                      "truncated: the header promises " + std::to_string(expected) +
                          " bytes but the file has " + std::to_string(file_bytes));
  if (file_bytes > expected)
    return file_error(errc::io_error, file,
                      "damaged: " + std::to_string(file_bytes) + " bytes, but the header says " +
                          std::to_string(expected));
  return f;
}

caf::error read_items(idx_file& f, const fs::path& file, uint64_t count,
                      std::vector<uint8_t>& out) {
  out.resize(count * f.item_bytes);
  if (!f.in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size())))
    return file_error(errc::io_error, file, "read failed");
  return {};
}

uint64_t clamp_limit(uint64_t count, uint64_t limit) {
  return limit > 0 && limit < count ? limit : count;
}

caf::expected<mnist_dataset::split> load_split(const fs::path& dir, const char* images_name,
                                               const char* labels_name, uint64_t limit) {
  auto images = read_idx_images(dir / images_name, limit);
  if (!images)
    return std::move(images.error());
  if (images->rows != mnist_dataset::image_side || images->cols != mnist_dataset::image_side)
    return file_error(errc::invalid_field, dir / images_name,
                      "images are " + std::to_string(images->rows) + "x" +
                          std::to_string(images->cols) + ", expected 28x28");
  auto labels = read_idx_labels(dir / labels_name, limit);
  if (!labels)
    return std::move(labels.error());
  if (labels->size() != images->count)
    return file_error(errc::invalid_field, dir / labels_name,
                      std::to_string(labels->size()) + " labels for " +
                          std::to_string(images->count) + " images in " + images_name);
  for (size_t i = 0; i < labels->size(); ++i)
    if ((*labels)[i] >= mnist_dataset::classes)
      return file_error(errc::invalid_field, dir / labels_name,
                        "label " + std::to_string(i) + " is " + std::to_string((*labels)[i]) +
                            ", not a class 0..9");
  mnist_dataset::split s;
  s.count = images->count;
  s.pixels = std::move(images->pixels);
  s.labels = std::move(*labels);
  return s;
}

}  // namespace

const char* to_string(mnist_variant v) {
  return v == mnist_variant::fashion ? "fashion-mnist" : "mnist";
}

caf::expected<idx_images> read_idx_images(const fs::path& file, uint64_t limit) {
  auto f = open_idx(file, images_magic, 3);
  if (!f)
    return std::move(f.error());
  idx_images out;
  out.count = clamp_limit(f->dims[0], limit);
  out.rows = f->dims[1];
  out.cols = f->dims[2];
  if (auto err = read_items(*f, file, out.count, out.pixels))
    return err;
  return out;
}

caf::expected<std::vector<uint8_t>> read_idx_labels(const fs::path& file, uint64_t limit) {
  auto f = open_idx(file, labels_magic, 1);
  if (!f)
    return std::move(f.error());
  std::vector<uint8_t> out;
  if (auto err = read_items(*f, file, clamp_limit(f->dims[0], limit), out))
    return err;
  return out;
}

caf::expected<std::shared_ptr<const mnist_dataset>> mnist_dataset::load(const fs::path& dir,
                                                                        mnist_variant variant,
                                                                        limits lim) {
  auto train = load_split(dir, mnist_train_images, mnist_train_labels, lim.train);
  if (!train)
    return std::move(train.error());
  auto test = load_split(dir, mnist_test_images, mnist_test_labels, lim.test);
  if (!test)
    return std::move(test.error());
  auto ds = std::make_shared<mnist_dataset>();
  ds->variant_ = variant;
  ds->train_ = std::move(*train);
  ds->test_ = std::move(*test);
  return std::shared_ptr<const mnist_dataset>(std::move(ds));
}

caf::expected<std::shared_ptr<const mnist_dataset>> mnist_dataset::load_cached(const fs::path& base,
                                                                               limits lim) {
  std::error_code ec;
  for (auto v : {mnist_variant::digits, mnist_variant::fashion}) {
    const fs::path dir = base / to_string(v);
    if (fs::is_directory(dir, ec))
      return load(dir, v, lim);
  }
  return file_error(errc::not_found, base / to_string(mnist_variant::digits) / mnist_train_images,
                    "file not found (nor a fashion-mnist folder beside it)");
}

fs::path default_data_dir() {
  if (const char* dir = std::getenv("KEEL_DATA_DIR"); dir && *dir)
    return dir;
  if (const char* home = std::getenv("HOME"); home && *home)
    return fs::path(home) / ".cache" / "keel";
  return fs::path(".cache") / "keel";
}

}  // namespace keel
