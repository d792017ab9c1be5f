#include <cmath>

#include <doctest/doctest.h>

#include "actors/optimizer.hpp"
#include "messages/errors.hpp"

using namespace keel;

TEST_CASE("each optimizer's first steps match its textbook update") {
  optimizer_config c;
  c.lr = 0.5f;
  float g[1] = {2.0f};

  c.kind = optimizer_kind::sgd;
  float p = 1.0f;
  apply_update(c, 1, &p, nullptr, nullptr, g, 1);
  CHECK(p == doctest::Approx(0.0));

  c.kind = optimizer_kind::momentum;
  c.momentum = 0.5f;
  p = 1.0f;
  float v = 0.0f;
  apply_update(c, 1, &p, &v, nullptr, g, 1);  // v = 2, p = 1 - 0.5*2 = 0
  apply_update(c, 2, &p, &v, nullptr, g, 1);  // v = 3, p = 0 - 1.5 = -1.5
  CHECK(v == doctest::Approx(3.0));
  CHECK(p == doctest::Approx(-1.5));

  c.kind = optimizer_kind::adagrad;
  c.initial_accumulator = 0.0f;
  c.epsilon = 0.0f;
  p = 1.0f;
  float acc = initial_slot(c, 0);
  apply_update(c, 1, &p, &acc, nullptr, g, 1);  // acc = 4, p = 1 - 0.5*2/2 = 0.5
  CHECK(acc == doctest::Approx(4.0));
  CHECK(p == doctest::Approx(0.5));

  c.kind = optimizer_kind::adam;
  c.epsilon = 0.0f;
  p = 1.0f;
  float m = 0, s = 0;
  apply_update(c, 1, &p, &m, &s, g, 1);  // bias-corrected m/sqrt(v) = sign(g) = 1
  CHECK(p == doctest::Approx(0.5));
}

TEST_CASE("optimizer and slot counts are parsed by name, unknown names refused") {
  CHECK(*parse_optimizer("adam") == optimizer_kind::adam);
  CHECK(slots_per_parameter(optimizer_kind::adam) == 2);
  CHECK(slots_per_parameter(optimizer_kind::sgd) == 0);
  auto bad = parse_optimizer("rmsprop");
  REQUIRE(!bad);
  CHECK(describe(bad.error()).find("unknown optimizer 'rmsprop'") != std::string::npos);
}
