"""The words the story generator (stories.py) draws from.

Every entry carries the forms the sentences need, written out rather than derived, so that
articles, plurals and past tenses are right by construction. Nouns that take "an" start with a
sounded vowel; no word here starts with a silent "h" or a "you"-sounding "u".
"""

GIRL_NAMES = [
    "Lily", "Mia", "Emma", "Sara", "Anna", "Lucy", "Zoe", "Ella", "Amy", "Rose", "Nora", "Ruby",
    "Grace", "Maya", "Kate", "Jane", "Molly", "Daisy", "Hannah", "Lena", "Ivy", "Clara", "Alice",
    "Sophie", "Tina", "Nina", "Julia", "Olivia", "Chloe", "Bella", "Eva", "Iris", "Leah", "Mila",
]
BOY_NAMES = [
    "Tom", "Ben", "Max", "Sam", "Leo", "Jack", "Tim", "Finn", "Noah", "Jake", "Luke", "Ryan",
    "Oscar", "Henry", "Adam", "Eli", "Owen", "Hugo", "Theo", "Danny", "Peter", "Paul", "Mark",
    "Alex", "Ethan", "Oliver", "Lucas", "Felix", "Kai", "Omar", "Ivan", "Arlo", "Milo", "Nick",
]
# Names for animal characters; an animal's gender is drawn separately.
PET_NAMES = [
    "Pip", "Benny", "Rosie", "Coco", "Luna", "Bobo", "Fluffy", "Sunny", "Dot", "Tiny", "Buttons",
    "Pebble", "Nutmeg", "Ziggy", "Bubbles", "Honey", "Patch", "Snowy", "Whiskers", "Biscuit",
    "Peanut", "Maple", "Clover", "Hazel", "Rusty", "Olive", "Poppy", "Willow", "Jasper", "Twig",
    "Acorn", "Button", "Mocha", "Pepper", "Socks", "Toffee",
]

# (singular, plural, sound): the sound is what the animal "did" in the past tense.
ANIMALS = [
    ("fox", "foxes", "barked"), ("rabbit", "rabbits", "squeaked"), ("bunny", "bunnies", "squeaked"),
    ("bear", "bears", "growled"), ("cat", "cats", "meowed"), ("dog", "dogs", "barked"),
    ("puppy", "puppies", "barked"), ("kitten", "kittens", "meowed"), ("owl", "owls", "hooted"),
    ("mouse", "mice", "squeaked"), ("squirrel", "squirrels", "chattered"),
    ("duck", "ducks", "quacked"), ("frog", "frogs", "croaked"), ("turtle", "turtles", "sighed"),
    ("bird", "birds", "chirped"), ("pig", "pigs", "oinked"), ("cow", "cows", "mooed"),
    ("horse", "horses", "neighed"), ("lamb", "lambs", "bleated"), ("deer", "deer", "sniffed"),
    ("hedgehog", "hedgehogs", "sniffed"), ("otter", "otters", "squeaked"),
    ("elephant", "elephants", "trumpeted"), ("lion", "lions", "roared"),
    ("tiger", "tigers", "roared"), ("monkey", "monkeys", "chattered"),
    ("giraffe", "giraffes", "hummed"), ("penguin", "penguins", "squawked"),
    ("dragon", "dragons", "puffed"), ("goat", "goats", "bleated"), ("hen", "hens", "clucked"),
    ("chick", "chicks", "peeped"), ("beaver", "beavers", "whistled"),
    ("badger", "badgers", "grunted"), ("raccoon", "raccoons", "chattered"),
    ("panda", "pandas", "grunted"), ("koala", "koalas", "grunted"), ("seal", "seals", "barked"),
    ("crab", "crabs", "clicked"), ("ant", "ants", "sighed"), ("bee", "bees", "buzzed"),
    ("butterfly", "butterflies", "sighed"), ("ladybug", "ladybugs", "sighed"),
    ("kangaroo", "kangaroos", "grunted"), ("zebra", "zebras", "neighed"),
]
# Animals that live in water or fly: they never climb trees or sit in mud in a plot.
SMALL_ANIMALS = [
    "rabbit", "bunny", "cat", "kitten", "mouse", "squirrel", "duck", "frog", "bird", "hedgehog",
    "puppy", "chick", "lamb", "turtle", "ladybug", "bee",
]

CHARACTER_ADJECTIVES = [
    "little", "small", "young", "brave", "shy", "curious", "kind", "happy", "clever", "friendly",
    "gentle", "playful", "busy", "tiny", "sleepy", "cheerful", "silly", "quiet", "funny", "old",
    "helpful", "smart", "proud", "lively",
]
COLORS = [
    "red", "blue", "green", "yellow", "orange", "pink", "purple", "white", "brown", "gold",
    "silver", "shiny", "striped", "spotted",
]

# (noun, plural): things a character owns, loses, shares or finds.
THINGS = [
    ("ball", "balls"), ("kite", "kites"), ("hat", "hats"), ("book", "books"),
    ("toy car", "toy cars"), ("toy boat", "toy boats"), ("doll", "dolls"),
    ("teddy bear", "teddy bears"), ("balloon", "balloons"), ("shell", "shells"),
    ("key", "keys"), ("cup", "cups"), ("blanket", "blankets"), ("drum", "drums"),
    ("bell", "bells"), ("scarf", "scarves"), ("boot", "boots"), ("map", "maps"),
    ("box", "boxes"), ("basket", "baskets"), ("crayon", "crayons"), ("coin", "coins"),
    ("marble", "marbles"), ("ribbon", "ribbons"), ("puzzle", "puzzles"),
    ("whistle", "whistles"), ("umbrella", "umbrellas"), ("feather", "feathers"),
    ("stone", "stones"), ("cape", "capes"), ("wagon", "wagons"), ("bike", "bikes"),
    ("sled", "sleds"), ("bucket", "buckets"), ("jar", "jars"), ("ring", "rings"),
    ("robot", "robots"), ("train", "trains"), ("spinning top", "spinning tops"),
    ("flute", "flutes"), ("lantern", "lanterns"), ("glove", "gloves"), ("button", "buttons"),
]

# (noun, plural): food characters eat, find or share.
FOODS = [
    ("apple", "apples"), ("cookie", "cookies"), ("cake", "cakes"), ("pie", "pies"),
    ("carrot", "carrots"), ("sandwich", "sandwiches"), ("banana", "bananas"),
    ("muffin", "muffins"), ("pear", "pears"), ("plum", "plums"), ("bun", "buns"),
    ("strawberry", "strawberries"), ("orange", "oranges"), ("cupcake", "cupcakes"),
    ("nut", "nuts"), ("cherry", "cherries"), ("peach", "peaches"), ("pancake", "pancakes"),
]

# (name, "at" phrase, "to" phrase): where a story happens.
PLACES = [
    ("park", "at the park", "to the park"), ("forest", "in the forest", "to the forest"),
    ("garden", "in the garden", "to the garden"), ("farm", "on the farm", "to the farm"),
    ("beach", "at the beach", "to the beach"), ("pond", "by the pond", "to the pond"),
    ("hill", "on the hill", "up the hill"), ("meadow", "in the meadow", "to the meadow"),
    ("village", "in the village", "to the village"), ("river", "by the river", "to the river"),
    ("town", "in the town", "to the town"), ("school", "at school", "to school"),
    ("woods", "in the woods", "into the woods"), ("lake", "near the lake", "to the lake"),
    ("field", "in the big field", "to the big field"), ("zoo", "at the zoo", "to the zoo"),
    ("backyard", "in the backyard", "to the backyard"), ("valley", "in the valley", "to the valley"),
    ("island", "on the little island", "to the little island"),
    ("playground", "at the playground", "to the playground"),
    ("jungle", "in the jungle", "into the jungle"), ("orchard", "in the orchard", "to the orchard"),
    ("market", "at the market", "to the market"), ("library", "at the library", "to the library"),
]
# Where a lost thing can be: the search looks in one place of each list, in order. Disjoint
# lists, so even a model that picks the likeliest place every time never looks twice in one.
HIDING_SPOTS = [
    ["under the bed", "behind the couch", "under the table", "on top of the shelf",
     "behind the door", "under the stairs", "inside an old box", "in the basket"],
    ["behind the big tree", "in the tall grass", "under a big leaf", "in the bushes",
     "under a pile of leaves", "in the flower bed", "in a hollow log", "in a puddle"],
    ["next to the pond", "in the sand", "near the big rock", "under the bridge",
     "behind the barn", "by the gate", "under the swing", "next to the fence"],
]

# Openers by weather: (opening phrase, weather word).
OPENERS = {
    "sunny": ["One sunny morning", "On a warm summer day", "One bright spring morning",
              "One sunny afternoon", "On a hot day"],
    "rainy": ["One rainy afternoon", "One gray and rainy morning", "On a wet spring day"],
    "windy": ["One windy day", "One cool and windy morning", "On a breezy autumn day"],
    "snowy": ["One cold winter morning", "On a snowy day", "One frosty morning"],
    "plain": ["One day", "Early one morning", "One afternoon", "One evening", "One morning"],
}

FEELINGS_GOOD = ["happy", "glad", "proud", "excited", "thankful", "cheerful"]
FEELINGS_BAD = ["sad", "worried", "upset", "unhappy", "lonely"]

# (what, "afraid of" object, the brave act in the past tense)
FEARS = [
    ("the dark", "the dark", "turned off the light and closed {pos} eyes"),
    ("thunder", "the loud thunder", "listened to the storm without hiding"),
    ("water", "the deep water", "jumped into the water and swam"),
    ("the slide", "the big slide", "climbed up and went down the slide"),
    ("the big dog", "the big dog next door", "said hello to the big dog"),
    ("bees", "the buzzing bees", "walked past the bees very calmly"),
    ("the tall tree", "climbing the tall tree", "climbed all the way up the tree"),
    ("the new school", "the new school", "walked into the new school with a smile"),
]

# (goal as a "to ..." phrase, first failure, second failure, the fix, the success): the fix is
# a past-tense verb phrase that follows the character's name.
PROJECTS = [
    ("to build a sandcastle", "a big wave washed it away", "the sand was too dry and it fell down",
     "used wet sand and built it far from the water", "the sandcastle stood tall and strong"),
    ("to build a tall tower of blocks", "it wobbled and fell over", "the top block slipped off",
     "put the big blocks at the bottom and the small ones on top", "the tower stood very tall"),
    ("to fly a kite", "the kite fell to the ground", "the string got stuck in a bush",
     "ran into the wind and let the string out slowly", "the kite flew high up in the sky"),
    ("to bake a cake", "the cake came out flat", "there was too much salt in it",
     "read the recipe carefully and measured everything", "the cake was soft and sweet"),
    ("to ride a bike", "the bike tipped over", "the front wheel hit a rock",
     "looked ahead, kept pedaling and held the handles tight", "the bike rolled all the way down the path"),
    ("to build a birdhouse", "the roof fell off", "the door was too small for a bird",
     "used more nails and made the door bigger", "a little bird moved into the birdhouse"),
    ("to paint a picture of the sea", "the paint ran down the paper", "the colors got all muddy",
     "let each color dry before painting the next one", "the picture looked just like the sea"),
    ("to make a paper boat", "the boat sank at once", "the paper tore in the middle",
     "folded thick paper very carefully", "the paper boat floated across the pond"),
    ("to grow a sunflower", "the seed did not come up", "a bird ate the little sprout",
     "watered the seed every day and put a net around it", "a tall yellow sunflower grew in the garden"),
    ("to climb the big hill", "the path was too steep", "it started to get dark",
     "started early in the morning and took small steps", "the whole valley could be seen from the top"),
    ("to learn to whistle", "only air came out", "the sound was very quiet",
     "practiced a little bit every day", "a loud and happy whistle came out"),
    ("to jump over the puddle", "the puddle was too wide", "a foot landed in the water with a splash",
     "took a long run and jumped as far as possible", "both feet landed on the other side"),
]

# (as a noun after "his"/"her", as a name in dialogue)
PARENTS = [("mom", "Mom"), ("dad", "Dad"), ("grandma", "Grandma"), ("grandpa", "Grandpa")]

# Indoor games on a rainy day: (past-tense activity sentence tail).
INDOOR_FUN = [
    "built a big fort out of pillows and blankets",
    "drew funny pictures with bright crayons",
    "baked cookies and ate them while they were warm",
    "played a game of hide and seek in the house",
    "made puppets out of old socks and put on a show",
    "read a book about pirates and brave sailors",
    "built a castle out of boxes",
    "sang songs and danced in the living room",
]

# Wonders found on an adventure: (noun phrase with article, what it looked like).
WONDERS = [
    ("a hidden garden", "full of flowers of every color"),
    ("a little waterfall", "that sparkled in the sun"),
    ("a field of sunflowers", "taller than the trees"),
    ("a cave", "with shiny stones on the walls"),
    ("an old lighthouse", "that stood by the sea"),
    ("a pond", "full of tiny silver fish"),
    ("a tree house", "that somebody had built long ago"),
    ("a secret path", "that led to a sunny clearing"),
    ("a rainbow", "over the whole valley"),
    ("a nest", "with three little blue eggs in it"),
]

# Where a small animal gets stuck: (where, the tool with its article, how the tool frees it).
STUCK = [
    ("up in a tall tree", "a long ladder", "put the ladder against the tree and carried the {kind} down"),
    ("in the thick mud", "a strong rope", "threw one end of the rope to the {kind} and pulled it out"),
    ("in a deep hole", "a basket on a rope", "lowered the basket into the hole, and the {kind} climbed in"),
    ("under a heavy branch", "a big stick", "pushed the branch away with the stick"),
    ("in a thorny bush", "a pair of gloves", "put on the gloves and moved the thorns aside"),
    ("on a rock in the river", "a long plank", "laid the plank across the water, and the {kind} walked to the shore"),
]

GAMES = [
    "tag", "hide and seek", "catch", "jump rope", "leapfrog", "a game of pretend",
    "a guessing game", "a game with a ball",
]

MORALS = {
    "help": ["Friends help each other.", "It is good to help a friend in need.",
             "When we help each other, every problem gets smaller."],
    "share": ["Sharing makes everyone happy.", "Toys are more fun when you share them.",
              "It is kind to share."],
    "brave": ["Being brave does not mean you are never scared.",
              "You can do hard things if you try.", "Fear gets smaller when you face it."],
    "try": ["Never give up.", "If at first you do not succeed, try again.",
            "Practice makes things better."],
    "friends": ["A new friend can be found anywhere.", "Being kind is the best way to make friends."],
    "honest": ["It is always best to tell the truth.", "Saying sorry can fix many things."],
    "give": ["Giving is as much fun as getting.", "A gift made with love is the best gift."],
    "joy": ["Even a rainy day can be a happy day.", "You can have fun in any weather."],
}
