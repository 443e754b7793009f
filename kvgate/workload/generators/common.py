"""Helpers shared by the synthetic generators: parameter checks, sizing, random values and words.

Everything random takes the caller's `random.Random`, so a generator stays a pure function of its
parameters and seed.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Sequence

from kvgate.workload.generators.base import Messages, fit_to_length
from kvgate.workload.tokenizer import PromptTokenizer


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# Plain English nouns and adjectives: values of "word" needles, keys, and the common-words lists.
NOUNS = _words(
    """
    anchor apple arrow badge bakery balcony banana banner barrel basket beacon bicycle blanket bottle
    bracelet bridge bucket button cabin cabinet camera candle canoe canvas carpet carrot castle cellar
    chimney cloud compass cookie cottage crayon cricket curtain cushion dolphin donkey dragon drawer
    eagle engine envelope falcon feather fence fiddle forest fountain garden garlic giraffe glacier
    guitar hammer harbor helmet hermit island jacket jungle kettle kitten ladder lantern lemon library
    lizard lobster locket magnet mango marble meadow mirror monkey mountain muffin napkin needle
    notebook ocean orchard otter oyster paddle palace panther parrot pebble pencil pepper piano pillow
    pirate planet pocket potato puzzle rabbit radish ribbon rocket saddle sailor salmon sandal scarf
    shovel silver spider sponge squirrel stable statue stove sunset teapot temple tiger tomato tractor
    trumpet tunnel turtle umbrella valley violin wagon walnut wardrobe window wizard yacht zebra
    acorn almond antler apron attic avocado bagel ballot bamboo banjo barn beetle biscuit blossom
    boulder bramble brook broom buffalo cactus camel canyon captain cargo cashew cedar cherry chestnut
    cobra coconut comet copper coral cotton cowboy coyote crater crown crystal cupboard daisy desert
    diamond dinghy dune emerald falconer ferry fig fjord flamingo flute fossil freighter gazelle geyser
    ginger goblet gondola gorilla granite grape gravel hamster harp hazel hedgehog heron hickory
    honey hornet hyena iceberg igloo ivory jaguar jasmine jelly juniper kayak kiwi koala lagoon
    lavender leopard lettuce lilac linen llama lotus lynx mackerel maple marsh mason meteor mitten
    moose mosaic moth mussel nectar nickel nutmeg oasis olive onion orchid ostrich owl panda papaya
    parsley peach peanut pearl pelican penguin pepperoni pigeon pine plum pony poppy porcupine pudding
    pumpkin quail quartz quilt raccoon raisin raven reindeer rhubarb robin rosemary ruby saffron
    sardine satchel scooter seagull sequoia shamrock sheriff shrimp skylark sleigh slipper snail
    sparrow spinach spruce stallion starfish sunflower swan sycamore tadpole tangerine thistle thimble
    tortoise toucan trolley truffle tulip tundra turnip unicorn vanilla velvet vulture waffle walrus
    wasp whale willow wolf woodpecker yogurt zucchini
    """
)

ADJECTIVES = _words(
    """
    amber ancient bitter bold brave breezy bright brisk bumpy calm cheerful chilly clever cloudy
    cosy crimson crispy curious dainty dazzling dusty eager elegant fancy fierce fluffy foggy fragrant
    frosty fuzzy gentle giant glossy golden graceful grumpy happy hasty hollow humble icy jolly jumpy
    keen lively lonely lucky mellow merry misty modest muddy narrow nimble noble odd orange patient
    plump polite proud purple quiet quick rapid rosy rusty scarlet shiny silent silky sleepy slender
    smoky snowy soft sparkly speedy spicy steady sticky stormy sturdy sunny swift tangy tender tidy
    tiny twisty velvety vivid wandering warm wary wild windy wise witty wooden woolly zesty
    """
)

VERBS = _words(
    """
    arrive bake balance borrow breathe build carry chase climb collect count dance deliver describe
    discover divide drift explain explore fetch float fold follow gather glide grow hammer harvest
    hover imagine inspect juggle knit launch listen measure mend navigate observe paddle paint plant
    polish prepare protect question recall repair rescue return scatter shelter sketch sort splash
    stitch study sweep travel trim unlock wander whistle wonder wrap
    """
)

ENGLISH_WORDS = tuple(dict.fromkeys((*NOUNS, *ADJECTIVES, *VERBS)))
"""All distinct plain words, for lists that need many (common-words extraction)."""


def check_lengths(lengths: Sequence[int], minimum: int = 64) -> None:
    if not lengths or any(not isinstance(n, int) or n < minimum for n in lengths):
        raise ValueError(f"lengths must be a non-empty list of token counts ≥ {minimum}")


def check_depths(depths: Sequence[float]) -> None:
    if not depths or any(not isinstance(d, int | float) or not 0.0 <= d <= 1.0 for d in depths):
        raise ValueError("depths must be a non-empty list of fractions in [0, 1]")


def check_choice(name: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")


def check_positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer ≥ 1, got {value!r}")


def fit_within(
    build: Callable[[int], Messages], target: int, tok: PromptTokenizer, max_n: int, what: str
) -> int:
    """`fit_to_length` for a builder that cannot grow past `max_n` units (a finite word list).

    Raises ValueError when even `max_n` units stay under `target`, instead of searching forever.
    """
    longest = tok.count_chat(build(max_n))
    if longest <= target:
        raise ValueError(f"{what} reaches only {longest} of the {target} tokens asked for")
    return fit_to_length(build, target, tok, hi=max(1, min(max_n, target // 8)))


def random_uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def random_number(rng: random.Random, digits: int) -> str:
    return str(rng.randrange(10 ** (digits - 1), 10**digits))


def random_compound(rng: random.Random) -> str:
    """An adjective-noun pair such as "misty-lantern": rare enough not to occur by chance."""
    return f"{rng.choice(ADJECTIVES)}-{rng.choice(NOUNS)}"


def distinct(make: Callable[[], str], k: int, avoid: set[str] | None = None) -> list[str]:
    """`k` distinct values from `make()`, none in `avoid` and none a substring of another.

    The substring rule keeps case-insensitive substring validators from passing on a neighbour.
    """
    taken = {a.lower() for a in avoid or set()}
    out: list[str] = []
    for _ in range(1000 * k):
        if len(out) == k:
            return out
        value = make()
        low = value.lower()
        if any(low in t or t in low for t in taken):
            continue
        taken.add(low)
        out.append(value)
    if len(out) == k:
        return out
    raise ValueError(f"cannot draw {k} distinct values")


def join_words(items: Sequence[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def length_bucket(n_tokens: int) -> str:
    """Slice label of a measured prompt length: the power of two at or above it, at least 256.

    Labelled like `ctx_bucket`: 300 → "512", 1500 → "2k", 4096 → "4k".
    """
    edge = 256
    while edge < n_tokens:
        edge *= 2
    return f"{edge // 1024}k" if edge >= 1024 else str(edge)
