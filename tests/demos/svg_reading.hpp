#pragma once
// Reads the SVG that render_svg writes back as XML (Boost.PropertyTree's
// parser: it fails on anything that is not well-formed), so tests count
// elements by class and read their coordinates.

#include <sstream>
#include <string>
#include <vector>

#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <doctest/doctest.h>

namespace keel::test {

namespace pt = boost::property_tree;

inline pt::ptree parse_svg(const std::string& svg) {
  pt::ptree doc;
  std::istringstream in(svg);
  pt::read_xml(in, doc);  // throws xml_parser_error if not well-formed
  REQUIRE(doc.count("svg") == 1);
  return doc;
}

// Every element below `node` (at any depth) whose class attribute is `cls`.
inline void elements_of_class(const pt::ptree& node, const std::string& cls,
                              std::vector<const pt::ptree*>& out) {
  for (auto& [name, child] : node) {
    if (name == "<xmlattr>" || name == "<xmlcomment>")
      continue;
    if (child.get<std::string>("<xmlattr>.class", "") == cls)
      out.push_back(&child);
    elements_of_class(child, cls, out);
  }
}

inline std::vector<const pt::ptree*> elements_of_class(const pt::ptree& doc, const std::string& cls) {
  std::vector<const pt::ptree*> out;
  elements_of_class(doc, cls, out);
  return out;
}

// The (x, y) points of the polyline of class `cls` (exactly one must exist).
inline std::vector<std::pair<double, double>> polyline_points(const pt::ptree& doc,
                                                              const std::string& cls) {
  auto lines = elements_of_class(doc, cls);
  REQUIRE(lines.size() == 1);
  std::istringstream in(lines.front()->get<std::string>("<xmlattr>.points", ""));
  std::vector<std::pair<double, double>> out;
  std::string point;
  while (in >> point) {
    auto comma = point.find(',');
    REQUIRE(comma != std::string::npos);
    out.emplace_back(std::stod(point.substr(0, comma)), std::stod(point.substr(comma + 1)));
  }
  return out;
}

// The x of a marker group's line.
inline double marker_x(const pt::ptree& marker) {
  auto line = marker.get_child_optional("line");
  REQUIRE(line.has_value());
  return std::stod(line->get<std::string>("<xmlattr>.x1"));  // get<double> trips -Wmaybe-uninitialized
}

}  // namespace keel::test
