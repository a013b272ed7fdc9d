#include "tests/lib/tagsutil.h"
#include "tags/tags.h"

int tags_fixture_setup(void **state)
{
    *state = tags_table_new(10000);   /* grows as tags come: costs nothing until then */
    return *state ? 0 : -1;
}

int tags_fixture_teardown(void **state)
{
    tags_table_free(*state);
    return 0;
}
