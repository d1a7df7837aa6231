# Writes OUTPUT, a C++ file defining `const std::string_view granary::SYMBOL` (declared in HEADER)
# with the bytes of INPUT:
#   cmake -DINPUT=f -DOUTPUT=f.cc -DHEADER=dir/x.h -DSYMBOL=kName -P embed_file.cmake
file(READ ${INPUT} content HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${content}")
get_filename_component(input_name ${INPUT} NAME)
file(WRITE ${OUTPUT}
  "// Generated from ${input_name} by scripts/embed_file.cmake. Do not edit.\n"
  "#include \"${HEADER}\"\n"
  "#include <string_view>\n"
  "namespace granary {\n"
  "namespace {\nconstexpr char kBytes[] = {${bytes}};\n}  // namespace\n"
  "extern const std::string_view ${SYMBOL};\n"
  "const std::string_view ${SYMBOL}(kBytes, sizeof(kBytes));\n"
  "}  // namespace granary\n")
