#include <cmath>
#include <cstring>
#include <vector>

#include <doctest/doctest.h>

#include "actors/core/optimizer.hpp"
#include "actors/core/update_rules.hpp"
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

TEST_CASE("every optimizer gives the same bits from a float array and from a message's bytes") {
  const size_t n = 1000;  // long enough for the vectorised loop and its tail
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i)
    g[i] = std::sin(static_cast<float>(i)) * 0.01f;
  std::vector<unsigned char> bytes(n * 4);
  std::memcpy(bytes.data(), g.data(), bytes.size());
  for (auto kind : {optimizer_kind::sgd, optimizer_kind::momentum, optimizer_kind::adagrad, optimizer_kind::adam}) {
    CAPTURE(to_string(kind));
    optimizer_config c;
    c.kind = kind;
    c.lr = 0.05f;
    std::vector<float> p1(n, 0.25f), a1(n, initial_slot(c, 0)), b1(n, initial_slot(c, 1));
    auto p2 = p1, a2 = a1, b2 = b1;
    for (uint64_t t = 1; t <= 3; ++t) {
      apply_update(c, t, p1.data(), a1.data(), b1.data(), g.data(), n);
      apply_update_bytes(c, t, p2.data(), a2.data(), b2.data(), bytes.data(), n);
    }
    CHECK(std::memcmp(p1.data(), p2.data(), n * 4) == 0);
    CHECK(std::memcmp(a1.data(), a2.data(), n * 4) == 0);
    CHECK(std::memcmp(b1.data(), b2.data(), n * 4) == 0);
    CHECK(p1[7] != 0.25f);  // it did update
  }
}

TEST_CASE("the sum of any number of gradients applies as their in-order sum, unrolled or not") {
  // Values whose float sum depends on the order of the additions.
  const std::vector<float> grads = {1e8f, 1.0f, -1e8f, 0.5f, -0.0f, 3.25f};
  for (auto kind : {optimizer_kind::sgd, optimizer_kind::momentum, optimizer_kind::adagrad,
                    optimizer_kind::adam}) {
    optimizer_config c;
    c.kind = kind;
    for (size_t k = 1; k <= grads.size(); ++k) {  // 2..4 unrolled, 1, 5 and 6 a plain loop
      CAPTURE(to_string(kind));
      CAPTURE(k);
      std::vector<std::vector<unsigned char>> bytes(k, std::vector<unsigned char>(4));
      std::vector<const unsigned char*> ptrs;
      float sum = 0.0f;
      for (size_t j = 0; j < k; ++j) {
        std::memcpy(bytes[j].data(), &grads[j], 4);
        ptrs.push_back(bytes[j].data());
        sum += grads[j];
      }
      // Parameter, slot 1, slot 2: one set through each path.
      float p1 = 0.5f, s1a = initial_slot(c, 0), s2a = initial_slot(c, 1);
      float p2 = p1, s1b = s1a, s2b = s2a;
      apply_update_sum(c, 3, &p1, &s1a, &s2a, ptrs.data(), k, 1);
      apply_update(c, 3, &p2, &s1b, &s2b, &sum, 1);
      CHECK(std::memcmp(&p1, &p2, 4) == 0);
      CHECK(std::memcmp(&s1a, &s1b, 4) == 0);
      CHECK(std::memcmp(&s2a, &s2b, 4) == 0);
    }
  }
}

TEST_CASE("a gradient_scale applies as the gradient times it, through every entry point") {
  const size_t n = 37;
  std::vector<float> g(n), half(n);
  for (size_t i = 0; i < n; ++i) {
    g[i] = std::cos(static_cast<float>(i)) * 0.3f;
    half[i] = g[i] * 0.5f;
  }
  std::vector<unsigned char> bytes(n * 4), zeros(n * 4, 0);
  std::memcpy(bytes.data(), g.data(), bytes.size());
  const unsigned char* two[] = {bytes.data(), zeros.data()};  // g + 0 = g
  for (auto kind : {optimizer_kind::sgd, optimizer_kind::momentum, optimizer_kind::adagrad, optimizer_kind::adam}) {
    CAPTURE(to_string(kind));
    optimizer_config plain;
    plain.kind = kind;
    optimizer_config scaled = plain;
    scaled.gradient_scale = 0.5f;
    // Four paths with the scale against the rule on g * 0.5 without it.
    std::vector<std::vector<float>> p(5, std::vector<float>(n, 0.25f)), s1(5, std::vector<float>(n, initial_slot(plain, 0))),
        s2(5, std::vector<float>(n, initial_slot(plain, 1)));
    for (uint64_t t = 1; t <= 3; ++t) {
      apply_update(plain, t, p[0].data(), s1[0].data(), s2[0].data(), half.data(), n);
      apply_update(scaled, t, p[1].data(), s1[1].data(), s2[1].data(), g.data(), n);
      apply_update_bytes(scaled, t, p[2].data(), s1[2].data(), s2[2].data(), bytes.data(), n);
      apply_update_sum(scaled, t, p[3].data(), s1[3].data(), s2[3].data(), two, 2, n);
      apply_prepared(prepare_update(scaled, t), p[4].data(), s1[4].data(), s2[4].data(), g.data(), n);
    }
    for (size_t k = 1; k < 5; ++k) {
      CAPTURE(k);
      CHECK(std::memcmp(p[0].data(), p[k].data(), n * 4) == 0);
      CHECK(std::memcmp(s1[0].data(), s1[k].data(), n * 4) == 0);
      CHECK(std::memcmp(s2[0].data(), s2[k].data(), n * 4) == 0);
    }
    // The scale mattered: the rule on g itself ends elsewhere.
    std::vector<float> q(n, 0.25f), r1(n, initial_slot(plain, 0)), r2(n, initial_slot(plain, 1));
    for (uint64_t t = 1; t <= 3; ++t) apply_update(plain, t, q.data(), r1.data(), r2.data(), g.data(), n);
    CHECK(std::memcmp(q.data(), p[0].data(), n * 4) != 0);
  }
}
