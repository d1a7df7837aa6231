# Writes OUTPUT, a C++ file defining granary::kStatusPageHtml with the bytes of INPUT.
file(READ ${INPUT} content HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${content}")
file(WRITE ${OUTPUT}
  "// Generated from obs/status_page.html by obs/embed_file.cmake. Do not edit.\n"
  "#include \"obs/status_page.h\"\n"
  "namespace granary {\n"
  "namespace {\nconstexpr char kBytes[] = {${bytes}};\n}  // namespace\n"
  "const std::string_view kStatusPageHtml(kBytes, sizeof(kBytes));\n"
  "}  // namespace granary\n")
