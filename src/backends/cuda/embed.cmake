# Embeds a binary file (a CUDA fatbin) as a C array:
#   cmake -DINPUT=f.fatbin -DOUTPUT=f.c -DNAME=symbol -P embed.cmake
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" chars)
math(EXPR bytes "${chars} / 2")
# 16 bytes per line, each byte as 0xNN,
string(REPEAT "[0-9a-f]" 32 line_re)
string(REGEX REPLACE "(${line_re})" "\\1\n" hex "${hex}")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
file(WRITE "${OUTPUT}"
  "/* Generated from ${INPUT} by src/backends/cuda/embed.cmake: do not edit. */\n"
  "#include <stddef.h>\n"
  "_Alignas(64) const unsigned char ${NAME}[] = {\n${body}};\n"
  "const size_t ${NAME}_size = ${bytes};\n")
