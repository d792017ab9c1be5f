// An application whose training loop runs in its own process while the job
// runs on a keel cluster: `keel cluster --application-loop` is the
// coordinator, `keel node` processes hold the shards, and this program
// joins one of the nodes as a client (keel::cluster_client, authenticated
// with the cluster secret as a node is) and runs the loops of the workers
// it names. Its gradient here is the probe model's own (every parameter's
// gradient -1, so at lr 1 each applied push adds exactly 1): run it
// against a job of `--model probe --lr 1`, whose report then checks that
// every push was applied once.
//
//   keel cluster --nodes 2 --secret-file S --application-loop --model probe --lr 1 --steps 200
//   cluster_loop 127.0.0.1:PORT S 0,1      # PORT: the node keel cluster names
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <keel/keel.hpp>

int main(int argc, char** argv) {
  if (argc != 4)
    return std::fprintf(stderr, "usage: cluster_loop HOST:PORT SECRET_FILE WORKER[,WORKER...]\n"), 2;
  keel::cluster_client_config cc;
  std::string why;
  auto at = keel::parse_node_address(argv[1], why);
  if (!at)
    return std::fprintf(stderr, "cluster_loop: %s\n", why.c_str()), 2;
  cc.join = *at;
  auto secret = keel::cluster_secret::from_file(argv[2]);
  if (!secret)
    return std::fprintf(stderr, "cluster_loop: %s\n", keel::describe(secret.error()).c_str()), 2;
  cc.secret = *secret;
  for (std::string list = argv[3]; !list.empty();) {
    auto comma = list.find(',');
    cc.workers.push_back(static_cast<uint32_t>(std::stoul(list.substr(0, comma))));
    list = comma == std::string::npos ? "" : list.substr(comma + 1);
  }
  auto cluster = keel::cluster_client::connect(cc);
  if (!cluster)
    return std::fprintf(stderr, "cluster_loop: %s\n", keel::describe(cluster.error()).c_str()), 1;
  const auto t = std::chrono::seconds(60);
  std::vector<std::thread> loops;
  std::vector<uint64_t> pushed(cc.workers.size(), 0);
  for (size_t i = 0; i < cc.workers.size(); ++i)
    loops.emplace_back([&, i] {
      auto c = (*cluster)->client(cc.workers[i], t);  // once the coordinator started the worker here
      if (!c)
        return (void)std::fprintf(stderr, "cluster_loop: %s\n", keel::describe(c.error()).c_str());
      std::vector<uint64_t> every_key(c->layout().sparse_key_count());
      for (uint64_t k = 0; k < every_key.size(); ++k)
        every_key[k] = k;
      for (auto s = c->next_step().wait(t); s && *s < c->steps(); s = c->next_step().wait(t)) {
        keel::step_keys keys;
        keys.sparse = every_key;
        auto p = c->pull(*s, keys).wait(t);
        if (!p)
          continue;  // step_moved: a restart moved the worker; next_step says where
        auto g = c->gradient_for(**p);
        for (auto& v : g.dense) v = -1.0f;
        for (auto& v : g.sparse_values) v = -1.0f;
        if (c->push(*s, std::move(g)).wait(t))
          ++pushed[i];
      }
    });
  for (auto& l : loops) l.join();
  // The workers stay up with their replay logs until the job ends.
  if (auto err = (*cluster)->wait_released(std::chrono::minutes(2)))
    return std::fprintf(stderr, "cluster_loop: %s\n", keel::describe(err).c_str()), 1;
  for (size_t i = 0; i < cc.workers.size(); ++i)
    std::printf("cluster_loop: worker:%u pushed %llu steps\n", cc.workers[i],
                static_cast<unsigned long long>(pushed[i]));
  std::printf("cluster_loop: the job let its workers go\n");
  return 0;
}
