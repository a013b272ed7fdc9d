# actor/ fragment: owned by the actor scheduler work.
ACTOR_LIB =
