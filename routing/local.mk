# routing/ fragment: owned by the router work.
ROUTING_LIB =
