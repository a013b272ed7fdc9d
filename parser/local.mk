noinst_LIBRARIES += parser/libparser.a
parser_libparser_a_SOURCES = \
	parser/rtu.h parser/internal.h \
	parser/crc.c parser/swap.c \
	parser/decode_reference.c parser/decode_fast.c \
	parser/path.c parser/json.c parser/request.c parser/length.c parser/hex.c parser/function.c
parser_libparser_a_SOURCES += parser/framer.c parser/pair.c parser/learn.c
