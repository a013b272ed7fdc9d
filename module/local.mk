# The one search order for rtugw's optional modules (module/module.h): the
# build tree beside the binary, else the installed module folder.
noinst_LIBRARIES += module/libmodule.a
module_libmodule_a_SOURCES = module/module.h module/path.c
