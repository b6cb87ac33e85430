"""Small hand-written word lists for the rule-based extractors (written by memstrata developers).

They live in code rather than data files so every install ships them. Entries are
case-folded on load; multi-word entries are separated by commas.
"""

from __future__ import annotations


def _comma_list(text: str) -> frozenset[str]:
    return frozenset(" ".join(item.split()).casefold() for item in text.split(",") if item.strip())


def word_set(text: str) -> frozenset[str]:
    """The case-folded words of a whitespace-separated list."""
    return frozenset(word.casefold() for word in text.split())


# Chat's praise, feelings and time words: frequent in conversation, never what it is about.
CHAT_FILLER = word_set("""
    great awesome amazing cool nice glad wow fun sure sound sounds look looks looking love loved loves lovely
    beautiful wonderful fantastic incredible exciting excited happy pretty super totally definitely hope feel feels
    feeling favorite favourite really thanks thank yeah hey new time times day days today lately recently
    they're we're i've you've we've i'd you'd i'll you'll i'm
    """)

COUNTRIES = _comma_list(
    """
    Afghanistan, Albania, Algeria, Andorra, Angola, Argentina, Armenia, Australia, Austria, Azerbaijan, Bahamas,
    Bahrain, Bangladesh, Barbados, Belarus, Belgium, Belize, Benin, Bhutan, Bolivia, Bosnia, Bosnia and Herzegovina,
    Botswana, Brazil, Brunei, Bulgaria, Burkina Faso, Burundi, Cambodia, Cameroon, Canada, Cape Verde, Chad, Chile,
    China, Colombia, Congo, Costa Rica, Croatia, Cuba, Cyprus, Czechia, Czech Republic, Denmark, Djibouti, Dominica,
    Dominican Republic, Ecuador, Egypt, El Salvador, England, Eritrea, Estonia, Eswatini, Ethiopia, Fiji, Finland,
    France, Gabon, Gambia, Georgia, Germany, Ghana, Greece, Greenland, Grenada, Guatemala, Guinea, Guyana, Haiti,
    Honduras, Hong Kong, Hungary, Iceland, India, Indonesia, Iran, Iraq, Ireland, Israel, Italy, Ivory Coast,
    Jamaica, Japan, Jordan, Kazakhstan, Kenya, Kosovo, Kuwait, Kyrgyzstan, Laos, Latvia, Lebanon, Lesotho, Liberia,
    Libya, Liechtenstein, Lithuania, Luxembourg, Madagascar, Malawi, Malaysia, Maldives, Mali, Malta, Mauritania,
    Mauritius, Mexico, Moldova, Monaco, Mongolia, Montenegro, Morocco, Mozambique, Myanmar, Namibia, Nepal,
    Netherlands, New Zealand, Nicaragua, Niger, Nigeria, North Korea, North Macedonia, Northern Ireland, Norway,
    Oman, Pakistan, Palestine, Panama, Papua New Guinea, Paraguay, Peru, Philippines, Poland, Portugal, Puerto Rico,
    Qatar, Romania, Russia, Rwanda, Samoa, San Marino, Saudi Arabia, Scotland, Senegal, Serbia, Seychelles,
    Sierra Leone, Singapore, Slovakia, Slovenia, Somalia, South Africa, South Korea, South Sudan, Spain, Sri Lanka,
    Sudan, Suriname, Sweden, Switzerland, Syria, Taiwan, Tajikistan, Tanzania, Thailand, Togo, Tonga, Trinidad,
    Tunisia, Turkey, Turkmenistan, Uganda, Ukraine, United Arab Emirates, UAE, United Kingdom, UK, United States,
    United States of America, USA, US, America, Uruguay, Uzbekistan, Vanuatu, Vatican, Venezuela, Vietnam, Wales,
    Yemen, Zambia, Zimbabwe, Korea, Holland, Britain, Great Britain
    """
)

REGIONS = _comma_list(
    """
    Africa, Antarctica, Asia, Europe, North America, South America, Latin America, Central America, Oceania,
    Scandinavia, Middle East, Caribbean, Mediterranean, Balkans, Siberia, Patagonia, Sahara, Amazon rainforest,
    Alps, Andes, Himalayas, Rockies, Pacific, Atlantic, Midwest, New England, Bay Area, Silicon Valley,
    Alabama, Alaska, Arizona, Arkansas, California, Colorado, Connecticut, Delaware, Florida, Hawaii, Idaho,
    Illinois, Indiana, Iowa, Kansas, Kentucky, Louisiana, Maine, Maryland, Massachusetts, Michigan, Minnesota,
    Mississippi, Missouri, Montana, Nebraska, Nevada, New Hampshire, New Jersey, New Mexico, New York,
    North Carolina, North Dakota, Ohio, Oklahoma, Oregon, Pennsylvania, Rhode Island, South Carolina,
    South Dakota, Tennessee, Texas, Utah, Vermont, Virginia, Washington, West Virginia, Wisconsin, Wyoming,
    Ontario, Quebec, British Columbia, Alberta, Bavaria, Catalonia, Tuscany, Andalusia, Provence, Brittany,
    Normandy, Sicily, Sardinia, Bali, Java, Sumatra, Tasmania, Queensland, Yorkshire, Cornwall, Algarve, Madeira,
    Azores, Crete, Corsica, Kerala, Punjab, Goa, Lapland, Yosemite, Yellowstone
    """
)

CITIES = _comma_list(
    """
    Amsterdam, Athens, Atlanta, Auckland, Austin, Baltimore, Bangkok, Barcelona, Beijing, Beirut, Belgrade, Berlin,
    Bern, Bogota, Boston, Brisbane, Brussels, Bucharest, Budapest, Buenos Aires, Cairo, Calgary, Cape Town, Caracas,
    Chicago, Copenhagen, Dallas, Delhi, New Delhi, Denver, Detroit, Dubai, Dublin, Edinburgh, Florence, Frankfurt,
    Geneva, Glasgow, Hamburg, Hanoi, Havana, Helsinki, Honolulu, Houston, Istanbul, Jakarta, Jerusalem,
    Johannesburg, Kyiv, Kiev, Kyoto, Lagos, Las Vegas, Lima, Lisbon, London, Los Angeles, LA, Madrid, Manchester,
    Manila, Marseille, Melbourne, Mexico City, Miami, Milan, Minneapolis, Montreal, Moscow, Mumbai, Munich, Nairobi,
    Naples, Nashville, New Orleans, New York City, NYC, Nice, Osaka, Oslo, Ottawa, Paris, Perth, Philadelphia,
    Phoenix, Pittsburgh, Portland, Porto, Prague, Reykjavik, Rio de Janeiro, Riyadh, Rome, Rotterdam, San Diego,
    San Francisco, San Jose, Santiago, Sao Paulo, São Paulo, Seattle, Seoul, Shanghai, Stockholm, Sydney, Taipei,
    Tallinn, Tel Aviv, Tokyo, Toronto, Vancouver, Venice, Vienna, Warsaw, Zurich, Salt Lake City, Orlando,
    Sacramento, Cleveland, Cincinnati, Brooklyn, Manhattan, Queens, Bronx, Hollywood, Oxford, Cambridge, Bristol,
    Liverpool, Leeds, Birmingham, Lyon, Seville, Valencia, Granada, Krakow, Gothenburg, Malmo, Bergen, Antwerp,
    Ghent, Bruges, Salzburg, Dubrovnik, Split, Marrakesh, Casablanca, Kathmandu, Hong Kong, Singapore, Kuala Lumpur,
    Ho Chi Minh City, Bangalore, Bengaluru, Chennai, Kolkata, Hyderabad, Karachi, Lahore, Dhaka, Tehran, Baghdad,
    Doha, Abu Dhabi, Montevideo, Quito, Medellin, Cancun, Guadalajara, Havana
    """
)

PLACES = COUNTRIES | REGIONS | CITIES

ORGANIZATIONS = _comma_list(
    """
    Google, Alphabet, Microsoft, Apple, Amazon, Meta, Facebook, Instagram, WhatsApp, Twitter, LinkedIn, Netflix,
    Spotify, Tesla, SpaceX, IBM, Intel, Nvidia, AMD, Oracle, Salesforce, Adobe, Uber, Lyft, Airbnb, OpenAI,
    Anthropic, Samsung, Sony, Toyota, Honda, BMW, Volkswagen, Mercedes, Ford, Boeing, Airbus, Siemens, Philips,
    Nokia, Ericsson, IKEA, Lego, Nike, Adidas, Starbucks, McDonald's, Walmart, Costco, Disney, Pixar, Marvel,
    YouTube, TikTok, Reddit, Wikipedia, GitHub, GitLab, Mozilla, Shopify, Stripe, PayPal, Visa, Mastercard,
    Goldman Sachs, JPMorgan, Deloitte, McKinsey, Accenture, KPMG, PwC, EY, NASA, ESA, FBI, CIA, NSA, UN,
    United Nations, UNICEF, UNESCO, WHO, NATO, EU, European Union, Red Cross, Greenpeace, Amnesty International,
    NHS, BBC, CNN, NPR, Reuters, YMCA, Harvard, Stanford, MIT, Yale, Princeton, Oxford University,
    Cambridge University, Berkeley, Caltech, Columbia University, NYU, UCLA, Walgreens, Target Corporation,
    Home Depot, Whole Foods, Trader Joe's, Etsy, eBay, Zoom, Slack, Dropbox, Atlassian, Canva, Duolingo
    """
)

ORGANIZATION_SUFFIXES = word_set(
    """
    Inc Ltd Llc Corp Corporation Co Company Companies Group Holdings Partners Associates Foundation Fund Trust
    University College School Academy Institute Bank Hospital Clinic Club Society Association Federation Council
    Committee Agency Bureau Department Ministry Center Centre Studios Studio Labs Lab Laboratories Systems
    Technologies Solutions Industries Enterprises Ventures Capital Network Media Press Records Airlines Airways
    Motors Pharmaceuticals Church Museum Library Theatre Theater Orchestra Band Team Union League
    """
)

# Words that open an organisation's name when an "of" follows: "University of Lisbon", "Bank of America".
ORGANIZATION_HEADS = word_set(
    """
    University College School Academy Institute Bank Hospital Museum Library Church Department Ministry Society
    Association Federation Council Board Office Order Church League Federal
    """
)

PLACE_SUFFIXES = word_set(
    """
    City Town Village County State Province Republic Kingdom Island Islands Isle Street St Avenue Ave Road Rd
    Boulevard Blvd Lane Drive Square Plaza Park Garden Gardens Lake Lakes River Bay Beach Coast Mountain Mountains
    Mount Mt Hill Hills Valley Canyon Desert Forest Falls Harbor Harbour Port Peninsula Sea Ocean Gulf Bridge
    Airport Station Heights Springs Creek Trail Highway District Quarter Shire Glacier Volcano Reef
    """
)

# Words that open a place's name: "Lake Tahoe", "Mount Fuji", "St. Louis", "Fort Worth".
PLACE_HEADS = word_set("Lake Mount Mt St Fort Port Cape Isle Glen Lago Monte Rio San Santa Sao São")

# Common given names; ambiguous ones that are also everyday words (Will, May, Hope, Grace ...) are left out.
FIRST_NAMES = word_set(
    """
    Aaron Abigail Adam Adrian Ahmed Aisha Alan Albert Alejandro Alex Alexander Alexandra Alice Alicia Alison Amanda
    Amelia Amir Amy Ana Andrea Andrew Angela Anna Anne Anthony Antonio Arjun Arthur Ava Barbara Ben Benjamin Beth
    Brandon Brian Caleb Carl Carla Carlos Caroline Catherine Charles Charlie Charlotte Chen Chloe Chris Christina
    Christopher Claire Daniel Daniela David Deborah Diana Diego Dmitri Elena Eli Elijah Elizabeth Ella Emily Emma
    Eric Ethan Eva Evan Fatima Felix Fernando Fiona Francesca Gabriel Gabriela George Hannah Harry Hassan Helen
    Henry Hiroshi Ian Isaac Isabel Isabella Ivan Jack Jacob James Jane Jason Jennifer Jessica Jim John Jonathan
    Jorge Jose José Joseph Joshua Juan Julia Julian Justin Karen Kate Katherine Kevin Kim Laura Lauren Leo Liam
    Linda Lisa Lucas Lucia Luis Luke Maria María Marco Margaret Maria Marie Mark Martin Mary Matthew Maya Megan
    Mei Melanie Mia Michael Michelle Miguel Mohammed Muhammad Nadia Natalie Nathan Nicholas Nicole Noah Nora Oliver
    Olivia Omar Oscar Pablo Patricia Paul Pedro Peter Priya Rachel Rahul Raj Rebecca Ricardo Richard Robert Rosa
    Ryan Samantha Samuel Sara Sarah Sean Sebastian Sergei Sofia Sophia Sophie Stephanie Steven Susan Takeshi Thomas
    Tim Timothy Tom Tyler Valentina Victor Victoria Wei William Xavier Yuki Zoe Zoë Jon Joanna Lena Lily Nina Tina
    Gina Dave Mike Joe Sam Max Nick Rob Steve Tony Matt Ana Ali Sven Lars Ingrid Astrid Greta Hans Klaus Jean Pierre
    Sophie Luca Giulia Marta Pilar Inês Joana João Tiago Rui Ravi Anil Sanjay Deepa Kenji Akira Haruto Min Jin
    """
)

# Capitalised words that never start an entity: function words, interjections, days, months, family terms.
CAPITALISED_STOPWORDS = word_set(
    """
    i me my mine myself you your yours yourself he him his she her hers it its we us our ours they them their
    theirs this that these those a an the some any every each all both no none many much most few several such
    other another and but or nor so yet because although though while if when whenever where since until unless
    as once after before then also plus however therefore anyway besides still meanwhile otherwise what who whom
    whose which why how is are was were am be been being do does did done have has had can could will would shall
    should might must in on at to from for with without by of about into over under through during between among
    around near up down off out just really very actually honestly maybe perhaps definitely totally absolutely
    basically here there now today tonight tomorrow yesterday lately recently soon later again already always never
    sometimes often usually even only not too well sure almost hey hi hello thanks thank thx congrats
    congratulations wow woah whoa oh ah aw aww ooh ugh hmm yeah yes yep yup no nope nah ok okay lol haha hahaha omg
    bye goodbye cheers sorry please welcome dear cool nice great awesome good glad happy amazing love oops alright
    right indeed hooray yay damn gosh geez btw tbh imo fyi asap diy tv pm am etc gonna wanna gotta kinda sorta
    monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat sun january
    february march april may june july august september october november december jan feb mar apr jun jul aug sep
    sept oct nov dec morning evening night afternoon weekend mom mum mommy mommy dad daddy mother father grandma
    grandpa granny grandmother grandfather nana papa mama sis bro mr mrs ms mx dr prof sir dame madam miss aunt uncle
    captain coach let lets let's like totally agree exactly true fine wait look listen guess anyway whatever oh
    """
)

# Titles that announce a person's name after them.
PERSON_TITLES = word_set("Mr Mrs Ms Mx Dr Prof Professor Sir Dame Madam Miss Aunt Uncle Captain Coach Judge Officer")

# Abbreviations whose full stop does not end a sentence.
ABBREVIATIONS = word_set("mr mrs ms mx dr prof st mt ft jr sr inc ltd co corp vs dept univ no")

# All-capitals tokens that are chat shorthand, not acronyms of names.
SHORTHAND = word_set(
    "ok lol lmao rofl omg omfg wtf btw tbh imo imho fyi asap diy tv pm am idk smh brb ty thx pls plz np ps"
)

# United States postal codes that are not also everyday words; matched only in capitals ("in CA").
STATE_CODES = word_set(
    """
    AK AL AZ CA CT DC FL GA IA IL KS KY LA MD MN MO MS MT NC ND NE NH NJ NM NV NY PA RI SC SD TN TX UT VA VT WA WI WV WY
    """
)

# Capitalised function words that may open a name in mid-sentence ("Under Armour", "The Hague").
NAME_OPENERS = word_set("under over the in on for to at by out up down off into beyond")
