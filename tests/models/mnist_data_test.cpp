#include "models/mnist_data.hpp"

#include <doctest/doctest.h>

#include <string>

#include "messages/errors.hpp"
#include "models/model_registry.hpp"
#include "test_support.hpp"

using namespace keel;
using keel::test::temp_dir;

namespace {

// The error text names the file and tells how to fetch the data.
void check_names_file(const caf::error& err, const std::filesystem::path& file) {
  const std::string text = describe(err);
  INFO(text);
  CHECK(text.find(file.string()) != std::string::npos);
  CHECK(text.find("bash scripts/fetch-mnist.sh") != std::string::npos);
}

}  // namespace

TEST_CASE("a well-formed IDX data set loads with every image and label") {
  temp_dir tmp;
  keel::test::write_synthetic_mnist(tmp.path(), 50, 20);
  auto ds = mnist_dataset::load(tmp.path(), mnist_variant::digits, {});
  REQUIRE_MESSAGE(ds, keel::test::error_text(ds));
  CHECK((*ds)->train().count == 50);
  CHECK((*ds)->test().count == 20);
  CHECK((*ds)->train().pixels.size() == 50 * 784);
  CHECK((*ds)->train().labels.size() == 50);
  const std::string bytes = keel::test::idx_images_bytes(50, 1);
  CHECK(static_cast<char>((*ds)->train().image(49)[783]) == bytes[16 + 49 * 784 + 783]);
}

TEST_CASE("limits load only the first images of each split") {
  temp_dir tmp;
  keel::test::write_synthetic_mnist(tmp.path(), 50, 20);
  auto ds = mnist_dataset::load(tmp.path(), mnist_variant::digits, {10, 5});
  REQUIRE(ds);
  CHECK((*ds)->train().count == 10);
  CHECK((*ds)->test().count == 5);
  CHECK((*ds)->test().labels.size() == 5);
}

TEST_CASE("a missing IDX file is not_found, naming the file and the fetch script") {
  temp_dir tmp;
  keel::test::write_synthetic_mnist(tmp.path(), 10, 10);
  std::filesystem::remove(tmp.path() / mnist_test_labels);
  auto ds = mnist_dataset::load(tmp.path(), mnist_variant::digits, {});
  REQUIRE(!ds);
  CHECK(is(ds.error(), errc::not_found));
  check_names_file(ds.error(), tmp.path() / mnist_test_labels);
}

TEST_CASE("an IDX file with a bad magic number is rejected, naming the file") {
  temp_dir tmp;
  keel::test::write_synthetic_mnist(tmp.path(), 10, 10);
  // A label file's magic in the image file's place.
  keel::test::write_file(tmp.path() / mnist_train_images,
                         keel::test::idx_images_bytes(10, 1, 0x00000801));
  auto ds = mnist_dataset::load(tmp.path(), mnist_variant::digits, {});
  REQUIRE(!ds);
  CHECK(is(ds.error(), errc::invalid_field));
  check_names_file(ds.error(), tmp.path() / mnist_train_images);
  CHECK(describe(ds.error()).find("magic") != std::string::npos);
}

TEST_CASE("a truncated IDX file is an io_error naming the file") {
  temp_dir tmp;
  keel::test::write_synthetic_mnist(tmp.path(), 10, 10);
  std::string bytes = keel::test::idx_images_bytes(10, 2);
  bytes.resize(bytes.size() - 100);
  keel::test::write_file(tmp.path() / mnist_test_images, bytes);
  auto ds = mnist_dataset::load(tmp.path(), mnist_variant::digits, {});
  REQUIRE(!ds);
  CHECK(is(ds.error(), errc::io_error));
  check_names_file(ds.error(), tmp.path() / mnist_test_images);
  CHECK(describe(ds.error()).find("truncated") != std::string::npos);
}

TEST_CASE("a file shorter than an IDX header is reported as truncated") {
  temp_dir tmp;
  keel::test::write_synthetic_mnist(tmp.path(), 10, 10);
  keel::test::write_file(tmp.path() / mnist_train_labels, std::string("\0\0\x08", 3));
  auto ds = mnist_dataset::load(tmp.path(), mnist_variant::digits, {});
  REQUIRE(!ds);
  check_names_file(ds.error(), tmp.path() / mnist_train_labels);
  CHECK(describe(ds.error()).find("truncated") != std::string::npos);
}

TEST_CASE("an IDX file longer than its header says is rejected") {
  temp_dir tmp;
  keel::test::write_synthetic_mnist(tmp.path(), 10, 10);
  keel::test::write_file(tmp.path() / mnist_train_labels,
                         keel::test::idx_labels_bytes(10, 1) + "extra");
  auto ds = mnist_dataset::load(tmp.path(), mnist_variant::digits, {});
  REQUIRE(!ds);
  CHECK(is(ds.error(), errc::io_error));
  check_names_file(ds.error(), tmp.path() / mnist_train_labels);
}

TEST_CASE("labels that disagree with the images in count or range are rejected") {
  temp_dir tmp;
  keel::test::write_synthetic_mnist(tmp.path(), 10, 10);
  keel::test::write_file(tmp.path() / mnist_train_labels, keel::test::idx_labels_bytes(9, 1));
  auto ds = mnist_dataset::load(tmp.path(), mnist_variant::digits, {});
  REQUIRE(!ds);
  check_names_file(ds.error(), tmp.path() / mnist_train_labels);
  std::string bad = keel::test::idx_labels_bytes(10, 1);
  bad[8 + 3] = 10;
  keel::test::write_file(tmp.path() / mnist_train_labels, bad);
  ds = mnist_dataset::load(tmp.path(), mnist_variant::digits, {});
  REQUIRE(!ds);
  CHECK(describe(ds.error()).find("label 3 is 10") != std::string::npos);
}

TEST_CASE("the cache prefers mnist/ and falls back to fashion-mnist/") {
  temp_dir tmp;
  auto none = mnist_dataset::load_cached(tmp.path(), {});
  REQUIRE(!none);
  CHECK(is(none.error(), errc::not_found));
  check_names_file(none.error(), tmp.path() / "mnist" / mnist_train_images);
  keel::test::write_synthetic_mnist(tmp.path() / "fashion-mnist", 10, 10);
  auto fashion = mnist_dataset::load_cached(tmp.path(), {});
  REQUIRE(fashion);
  CHECK((*fashion)->variant() == mnist_variant::fashion);
  keel::test::write_synthetic_mnist(tmp.path() / "mnist", 12, 10);
  auto digits = mnist_dataset::load_cached(tmp.path(), {});
  REQUIRE(digits);
  CHECK((*digits)->variant() == mnist_variant::digits);
  CHECK((*digits)->train().count == 12);
}

TEST_CASE("make_model reports missing MNIST data with the file and the fetch command") {
  temp_dir tmp;
  model_options o;
  o.data_dir = tmp.path();
  auto m = make_model("mnist-mlp", o);
  REQUIRE(!m);
  CHECK(is(m.error(), errc::not_found));
  check_names_file(m.error(), tmp.path() / "mnist" / mnist_train_images);
  o.data_dir.clear();
  auto empty = make_model("mnist-softmax", o);
  REQUIRE(!empty);
  CHECK(is(empty.error(), errc::invalid_argument));
}
