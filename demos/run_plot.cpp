#include "run_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "messages/errors.hpp"

namespace keel::cli {

namespace {

// Colours per kind, shared by the markers and the key in the title area.
constexpr const char* fault_colour = "#d62728";
constexpr const char* restart_colour = "#2ca02c";
constexpr const char* rollback_colour = "#9467bd";
constexpr const char* checkpoint_colour = "#8c8c8c";
constexpr const char* membership_colour = "#17becf";
constexpr const char* loss_colour = "#1f77b4";
constexpr const char* accuracy_colour = "#ff7f0e";
constexpr const char* recovery_fill = "#f4b6b6";

constexpr double label_lane_px = 13;
constexpr int label_lanes = 4;
constexpr double char_px = 6.2;  // width of one character of an 11px label, roughly

struct box {
  double x = 0, y = 0, w = 0, h = 0;
  double right() const { return x + w; }
  double bottom() const { return y + h; }
};

// Maps a domain interval onto a pixel interval, clamping to it.
struct linear {
  double d0 = 0, d1 = 1, p0 = 0, p1 = 1;
  double operator()(double v) const {
    double t = d1 > d0 ? (v - d0) / (d1 - d0) : 0;
    return p0 + std::clamp(t, 0.0, 1.0) * (p1 - p0);
  }
};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

// A tick label without trailing zeros, large ones short: "0.2", "1500",
// "-400k", "2.5M".
std::string tick_text(double v) {
  char buf[32];
  double a = std::abs(v);
  if (a >= 1e7)
    std::snprintf(buf, sizeof(buf), "%.6gM", v / 1e6);
  else if (a >= 1e4)
    std::snprintf(buf, sizeof(buf), "%.6gk", v / 1e3);
  else
    std::snprintf(buf, sizeof(buf), "%.6g", a < 1e-12 ? 0.0 : v);
  return buf;
}

std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Ticks at multiples of 1, 2 or 5 times a power of ten, about `target` of
// them, from at or below `lo` to at or above `hi`.
std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo))
    return {lo};
  double raw = (hi - lo) / target;
  double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag * (raw / mag < 1.5 ? 1 : raw / mag < 3.5 ? 2 : raw / mag < 7.5 ? 5 : 10);
  std::vector<double> out{std::floor(lo / step + 1e-9) * step};
  while (out.back() < hi - step * 1e-9)  // the last tick is at or above hi
    out.push_back(out.back() + step);
  return out;
}

// Turns a time since the start into the plot's x domain: a step, found by
// interpolating the progress series (with the start at step 0 and the end
// at the run's last step as anchors), or the time itself when the report
// has no progress points.
class x_domain {
 public:
  explicit x_domain(const run_report& r) {
    by_step_ = !r.progress.empty();
    double end_ms = r.seconds * 1000;
    for (auto& e : r.events)
      end_ms = std::max(end_ms, static_cast<double>(e.at_ms));
    if (!by_step_) {
      end_ = std::max(end_ms, 1.0);
      return;
    }
    anchors_.emplace_back(0.0, 0.0);
    for (auto& p : r.progress)
      if (static_cast<double>(p.at_ms) >= anchors_.back().first)
        anchors_.emplace_back(static_cast<double>(p.at_ms), static_cast<double>(p.step));
    double last_step = std::max(static_cast<double>(r.steps), anchors_.back().second);
    if (end_ms > anchors_.back().first)
      anchors_.emplace_back(end_ms, last_step);
    end_ = std::max(last_step, 1.0);
  }

  bool by_step() const { return by_step_; }
  double end() const { return end_; }

  double at_ms(double ms) const {
    if (!by_step_)
      return std::clamp(ms, 0.0, end_);
    if (ms <= anchors_.front().first)
      return anchors_.front().second;
    for (size_t i = 1; i < anchors_.size(); ++i) {
      auto [m0, s0] = anchors_[i - 1];
      auto [m1, s1] = anchors_[i];
      if (ms <= m1)
        return m1 > m0 ? s0 + (s1 - s0) * (ms - m0) / (m1 - m0) : s1;
    }
    return anchors_.back().second;
  }

 private:
  bool by_step_ = false;
  double end_ = 1;
  std::vector<std::pair<double, double>> anchors_;  // (ms, step), ms ascending
};

// Text labels above the panels, in lanes so that neighbours never overlap.
class label_lanes_t {
 public:
  // The lane (0 = nearest the panels) a label from x of `chars` characters
  // fits in, or -1 if every lane is taken there.
  int place(double x, size_t chars) {
    for (int lane = 0; lane < label_lanes; ++lane)
      if (x >= ends_[lane]) {
        ends_[lane] = x + 4 + static_cast<double>(chars) * char_px;
        return lane;
      }
    return -1;
  }

 private:
  double ends_[label_lanes] = {-1e9, -1e9, -1e9, -1e9};
};

struct plot {
  const run_report& r;
  plot_size size;
  std::ostringstream svg;
  x_domain domain;
  box loss_panel, accuracy_panel;
  linear x;
  label_lanes_t lanes;
  std::vector<std::pair<box, std::string>> notes;  // drawn last, over the markers

  plot(const run_report& report, plot_size s) : r(report), size(s), domain(report) {
    double left = 72, right = 28, top = 96 + label_lanes * label_lane_px, gap = 18;
    double panel_h = (s.height - top - gap - 52) / 2;
    loss_panel = {left, top, s.width - left - right, panel_h};
    accuracy_panel = {left, top + panel_h + gap, loss_panel.w, panel_h};
    x = {0, domain.end(), loss_panel.x, loss_panel.right()};
  }
  double label_top() const { return loss_panel.y - 6 - label_lanes * label_lane_px; }
};

void text(std::ostream& out, double x, double y, const std::string& s, const std::string& attrs) {
  out << "<text x=\"" << num(x) << "\" y=\"" << num(y) << "\" " << attrs << ">" << esc(s)
      << "</text>\n";
}

void vline(std::ostream& out, double x, double y0, double y1, const std::string& attrs) {
  out << "<line x1=\"" << num(x) << "\" y1=\"" << num(y0) << "\" x2=\"" << num(x) << "\" y2=\""
      << num(y1) << "\" " << attrs << "/>\n";
}

void draw_title(plot& p) {
  auto& r = p.r;
  std::ostringstream title, sub;
  title << "keel train: " << r.model << " \u00b7 " << r.consistency << " \u00b7 " << r.shards
        << (r.shards == 1 ? " shard" : " shards") << " \u00b7 " << r.workers
        << (r.workers == 1 ? " worker" : " workers");
  sub << r.steps << " steps in ";
  if (r.seconds < 1)
    sub << std::llround(r.seconds * 1000) << " ms";
  else
    sub << tick_text(std::round(r.seconds * 10) / 10) << " s";
  if (r.test_accuracy)
    sub << " \u00b7 test accuracy " << tick_text(std::round(*r.test_accuracy * 1000) / 1000);
  size_t faults = std::count_if(r.events.begin(), r.events.end(),
                                [](const job_event& e) { return e.kind == event_kind::fault; });
  sub << " \u00b7 " << faults << (faults == 1 ? " fault, " : " faults, ") << r.recoveries.size()
      << (r.recoveries.size() == 1 ? " recovery, " : " recoveries, ") << r.rollbacks
      << (r.rollbacks == 1 ? " rollback" : " rollbacks");
  text(p.svg, p.loss_panel.x, 24, title.str(), "font-size=\"16\" font-weight=\"bold\"");
  text(p.svg, p.loss_panel.x, 44, sub.str(), "font-size=\"12\" fill=\"#444\"");
}

// The key: one swatch per kind, in the title area.
void draw_key(plot& p) {
  struct item {
    const char* name;
    const char* colour;
    const char* dash;
    double width;
  };
  const item items[] = {{"fault", fault_colour, "", 2},      {"restart", restart_colour, "5,3", 1.5},
                        {"rollback", rollback_colour, "", 2}, {"checkpoint", checkpoint_colour, "2,3", 1},
                        {"membership", membership_colour, "1,2", 2},
                        {"loss", loss_colour, "", 2},         {"accuracy", accuracy_colour, "", 2}};
  double x = p.loss_panel.x, y = 66;
  p.svg << "<g class=\"key\" font-size=\"11\">\n";
  p.svg << "<rect x=\"" << num(x) << "\" y=\"" << num(y - 9) << "\" width=\"14\" height=\"12\" fill=\""
        << recovery_fill << "\"/>\n";
  text(p.svg, x + 18, y + 1, "recovering (fault \u2192 serving again)", "");
  x += 230;
  for (auto& i : items) {
    bool series = std::string(i.name) == "loss" || std::string(i.name) == "accuracy";
    p.svg << "<line x1=\"" << num(x) << "\" y1=\"" << num(series ? y - 3 : y - 10) << "\" x2=\""
          << num(series ? x + 16 : x) << "\" y2=\"" << num(series ? y - 3 : y + 3) << "\" stroke=\""
          << i.colour << "\" stroke-width=\"" << i.width << "\""
          << (*i.dash ? std::string(" stroke-dasharray=\"") + i.dash + "\"" : "") << "/>\n";
    double tx = x + (series ? 20 : 5);
    text(p.svg, tx, y + 1, i.name, "");
    x = tx + std::string(i.name).size() * char_px + 16;
  }
  p.svg << "</g>\n";
}

// A panel's frame, grid, y ticks and label, and x ticks (labelled only on
// the lowest panel).
void draw_panel(plot& p, const box& b, const linear& y, const std::vector<double>& y_ticks,
                const std::string& y_label, bool x_labels) {
  auto& out = p.svg;
  out << "<g class=\"axes\" font-size=\"11\" fill=\"#333\">\n";
  out << "<rect x=\"" << num(b.x) << "\" y=\"" << num(b.y) << "\" width=\"" << num(b.w) << "\" height=\""
      << num(b.h) << "\" fill=\"none\" stroke=\"#999\"/>\n";
  for (double v : y_ticks) {
    double py = y(v);
    out << "<line x1=\"" << num(b.x - 4) << "\" y1=\"" << num(py) << "\" x2=\"" << num(b.right())
        << "\" y2=\"" << num(py) << "\" stroke=\"#e6e6e6\"/>\n";
    text(out, b.x - 7, py + 4, tick_text(v), "text-anchor=\"end\"");
  }
  for (double v : nice_ticks(0, p.domain.end(), 10)) {
    if (v > p.domain.end() * (1 + 1e-9))
      break;  // the x axis ends with the run, not at a round number
    double px = p.x(v);
    vline(out, px, b.bottom(), b.bottom() + 4, "stroke=\"#999\"");
    if (x_labels)
      text(out, px, b.bottom() + 16, tick_text(v), "text-anchor=\"middle\"");
  }
  double cy = b.y + b.h / 2;
  out << "<text x=\"18\" y=\"" << num(cy) << "\" transform=\"rotate(-90 18 " << num(cy)
      << ")\" text-anchor=\"middle\" font-size=\"12\">" << esc(y_label) << "</text>\n";
  if (x_labels)
    text(out, b.x + b.w / 2, b.bottom() + 36,
         p.domain.by_step() ? "step (each worker's global steps)" : "milliseconds since the start",
         "text-anchor=\"middle\" font-size=\"12\"");
  out << "</g>\n";
}

// One polyline through the points that have a value, with a dot on each.
template <class Value>
void draw_series(plot& p, const linear& y, const char* name, const char* colour, Value value) {
  std::ostringstream points, dots;
  for (auto& pt : p.r.progress) {
    auto v = value(pt);
    if (!v || !std::isfinite(*v))
      continue;
    double px = p.x(static_cast<double>(pt.step)), py = y(*v);
    points << (points.tellp() > 0 ? " " : "") << num(px) << "," << num(py);
    dots << "<circle cx=\"" << num(px) << "\" cy=\"" << num(py) << "\" r=\"2.5\" fill=\"" << colour
         << "\"/>\n";
  }
  p.svg << "<polyline class=\"series " << name << "\" points=\"" << points.str()
        << "\" fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"2\"/>\n"
        << "<g class=\"points " << name << "\">\n" << dots.str() << "</g>\n";
}

// A note in the middle of a panel, over a white backing so that markers
// do not strike it through.
void draw_note(plot& p, const box& b, const std::string& note) {
  double w = static_cast<double>(note.size()) * char_px * 1.05 + 16, cx = b.x + b.w / 2;
  double cy = b.y + b.h / 2;
  p.svg << "<g class=\"note\">\n<rect x=\"" << num(cx - w / 2) << "\" y=\"" << num(cy - 14)
        << "\" width=\"" << num(w) << "\" height=\"22\" fill=\"white\" fill-opacity=\"0.9\"/>\n";
  text(p.svg, cx, cy + 2, note, "text-anchor=\"middle\" font-size=\"12\" fill=\"#666\" font-style=\"italic\"");
  p.svg << "</g>\n";
}

// Training loss over a range that includes 0 (the probe's "loss" is
// negative: it is the sum of its parameters, not a loss to minimise).
void draw_loss(plot& p) {
  double lo = 0, hi = 0;
  for (auto& pt : p.r.progress)
    if (std::isfinite(pt.loss)) {
      lo = std::min(lo, pt.loss);
      hi = std::max(hi, pt.loss);
    }
  auto ticks = nice_ticks(lo, hi > lo ? hi : lo + 1, 4);
  linear y{ticks.front(), ticks.back(), p.loss_panel.bottom(), p.loss_panel.y};
  draw_panel(p, p.loss_panel, y, ticks, "training loss", false);
  if (p.r.progress.empty())
    p.notes.emplace_back(p.loss_panel,
                         "no progress points in this report (keel train --quiet records none): "
                         "markers are placed by time");
  else
    draw_series(p, y, "loss", loss_colour,
                [](const progress_point& pt) { return std::optional<double>(pt.loss); });
}

void draw_accuracy(plot& p) {
  linear y{0, 1, p.accuracy_panel.bottom(), p.accuracy_panel.y};
  draw_panel(p, p.accuracy_panel, y, {0, 0.25, 0.5, 0.75, 1}, "held-out accuracy", true);
  bool scored = std::any_of(p.r.progress.begin(), p.r.progress.end(),
                            [](const progress_point& pt) { return pt.accuracy.has_value(); });
  if (!p.r.progress.empty() && !scored)
    p.notes.emplace_back(p.accuracy_panel, "held-out accuracy was not scored in this run");
  draw_series(p, y, "accuracy", accuracy_colour,
              [](const progress_point& pt) { return pt.accuracy; });
}

// One shaded span per recovery, behind everything else.
void draw_recoveries(plot& p) {
  double top = p.loss_panel.y, bottom = p.accuracy_panel.bottom();
  for (auto& rec : p.r.recoveries) {
    double from_ms = static_cast<double>(rec.fault_at_us) / 1000;
    double x0 = p.x(p.domain.at_ms(from_ms));
    double x1 = rec.served_after_us
                  ? p.x(p.domain.at_ms(from_ms + static_cast<double>(*rec.served_after_us) / 1000))
                  : p.loss_panel.right();
    double w = std::max(x1 - x0, 3.0);  // a sub-millisecond recovery stays visible
    p.svg << "<rect class=\"recovery\" x=\"" << num(x0 - (x1 - x0 < 3 ? 1.5 : 0)) << "\" y=\""
          << num(top) << "\" width=\"" << num(w) << "\" height=\"" << num(bottom - top)
          << "\" fill=\"" << recovery_fill << "\" fill-opacity=\"0.7\"><title>" << esc(to_string(rec))
          << "</title></rect>\n";
  }
}

// "kill shard:0" for the fault "kill:shard:0", "drop worker:1>shard:0" for
// "drop:worker:1>shard:0@55x3".
std::string fault_label(const job_event& e) {
  if (e.fault.empty())
    return "fault " + e.actor;
  std::string s = e.fault.substr(0, e.fault.find('@'));
  auto colon = s.find(':');
  if (colon != std::string::npos)
    s[colon] = ' ';
  return s;
}

// A membership change's label: a node that joined or was released, a
// plan's join or drain, an operator's drain or move, a worker that joined
// or left; nothing for the other
// membership events (a drain that begins late, the loads once moves end).
std::string membership_label(const job_event& e) {
  auto starts = [&](const char* text) { return e.detail.rfind(text, 0) == 0; };
  if (e.kind == event_kind::node_up)
    return starts("joined") ? "joined " + e.actor : std::string();
  if (e.kind == event_kind::released)
    return "released " + e.actor;
  if (!e.fault.empty())
    return fault_label(e);
  if (starts("drain requested"))
    return "drain " + e.actor;
  if (starts("joined at step"))  // an elastic worker
    return "joined " + e.actor;
  if (starts("left after step"))
    return "left " + e.actor;
  if (starts("move of ")) {
    auto what = e.detail.substr(8, e.detail.find(' ', 8) - 8);
    return "move " + what + " to " + e.actor;
  }
  return {};
}

void draw_marker(plot& p, const job_event& e, const char* kind, const char* colour, const char* dash,
                 const std::string& label) {
  // A checkpoint and a fault triggered at a step know their step (progress
  // points are stamped when the job records them, after scoring, so times
  // map to steps only roughly); other events have only their time.
  bool knows_step = e.kind == event_kind::checkpoint || (e.kind == event_kind::fault && e.step > 0);
  bool at_step = knows_step && p.domain.by_step();
  double x = p.x(at_step ? static_cast<double>(e.step) : p.domain.at_ms(static_cast<double>(e.at_ms)));
  int lane = label.empty() ? -1 : p.lanes.place(x, label.size());
  double label_y = p.loss_panel.y - 6 - lane * label_lane_px;
  double top = lane >= 0 ? label_y - 9 : p.loss_panel.y;
  p.svg << "<g class=\"marker " << kind << "\">\n<title>" << esc(to_string(e)) << "</title>\n";
  vline(p.svg, x, top, p.accuracy_panel.bottom(),
        std::string("stroke=\"") + colour + "\" stroke-width=\"" + (*dash ? "1.2" : "1.8") + "\"" +
          (*dash ? std::string(" stroke-dasharray=\"") + dash + "\"" : ""));
  if (lane >= 0)
    text(p.svg, x + 3, label_y, label, std::string("font-size=\"11\" fill=\"") + colour + "\"");
  p.svg << "</g>\n";
}

// Checkpoints first (thin, unlabelled: their number is in each one's
// tooltip), then rollbacks, faults, restarts and membership changes,
// labelled in that order.
void draw_markers(plot& p) {
  for (auto& e : p.r.events)
    if (e.kind == event_kind::checkpoint)
      draw_marker(p, e, "checkpoint", checkpoint_colour, "2,3", "");
  for (auto& e : p.r.events)
    if (e.kind == event_kind::rollback)
      draw_marker(p, e, "rollback", rollback_colour, "", "rollback");
  for (auto& e : p.r.events)
    if (e.kind == event_kind::fault)
      draw_marker(p, e, "fault", fault_colour, "", fault_label(e));
  for (auto& e : p.r.events)
    if (e.kind == event_kind::restart)
      draw_marker(p, e, "restart", restart_colour, "5,3", "restart " + e.actor);
  for (auto& e : p.r.events)
    if (e.kind == event_kind::membership || e.kind == event_kind::node_up || e.kind == event_kind::released)
      if (auto label = membership_label(e); !label.empty())
        draw_marker(p, e, "membership", membership_colour, "1,2", label);
}

}  // namespace

std::string render_svg(const run_report& r, const plot_size& size) {
  plot p(r, size);
  p.svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << size.width << "\" height=\""
        << size.height << "\" viewBox=\"0 0 " << size.width << " " << size.height
        << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
        << "<rect class=\"background\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  draw_title(p);
  draw_key(p);
  draw_recoveries(p);
  draw_loss(p);
  draw_accuracy(p);
  draw_markers(p);
  for (auto& [b, note] : p.notes)
    draw_note(p, b, note);
  p.svg << "</svg>\n";
  return p.svg.str();
}

caf::error write_plot(const run_report& r, const std::filesystem::path& path) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << render_svg(r);
  f.flush();
  if (!f)
    return make_error(errc::io_error, path.string() + ": cannot write the plot");
  return {};
}

}  // namespace keel::cli
